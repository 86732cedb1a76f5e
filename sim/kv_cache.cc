#include "sim/kv_cache.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crest::sim {

absl::StatusOr<KvCacheLayout> ComputeKvCache(const Profile& profile, int world_size,
                                             double npu_mem_gib, int cache_block_size) {
  if (world_size < 1 || cache_block_size < 1 || npu_mem_gib <= 0) {
    return absl::InvalidArgumentError("KV cache: worldSize, cacheBlockSize and memory must be > 0");
  }
  KvCacheLayout kv;
  kv.npu_mem_gib = npu_mem_gib;
  // Tensor parallelism splits the KV heads; GQA models with fewer KV heads
  // than cards replicate them, so each card keeps at least one.
  kv.kv_heads_per_card = (profile.num_kv_heads + world_size - 1) / world_size;
  kv.bytes_per_block = static_cast<int64_t>(profile.num_layers) * cache_block_size *
                       kv.kv_heads_per_card * profile.head_dim * profile.kv_dtype_bytes * 2;
  if (profile.kv_block_scale != 1) {
    kv.bytes_per_block = std::max<int64_t>(
        1, std::llround(static_cast<double>(kv.bytes_per_block) * profile.kv_block_scale));
  }
  auto mem_bytes = static_cast<int64_t>(std::floor(npu_mem_gib * 1024.0 * 1024.0 * 1024.0));
  kv.computed_blocks = mem_bytes / kv.bytes_per_block;
  kv.usable_blocks = kv.computed_blocks > 0 ? kv.computed_blocks - 1 : 0;
  return kv;
}

absl::StatusOr<KvCacheLayout> PlanKvCache(const Profile& profile, const SimConfig& config) {
  const std::string model_path = "BackendConfig.ModelDeployConfig.ModelConfig[0]";
  if (config.world_size < profile.min_world_size || config.world_size > profile.max_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_path, ".worldSize: ", config.world_size, " is out of range for profile ",
        profile.name, ", expected [", profile.min_world_size, ", ", profile.max_world_size, "]"));
  }
  double weights_per_card = profile.weights_gib / config.world_size;
  double free_gib = profile.device_memory_gib - profile.runtime_overhead_gib - weights_per_card;
  double mem = config.npu_mem_size_gb;
  if (config.npu_mem_size_gb == -1) mem = std::floor(free_gib * 0.8);
  if (mem <= 0 ||
      weights_per_card + mem + profile.runtime_overhead_gib > profile.device_memory_gib) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "NPU out of memory: weights %.2f GiB/card + KV cache %.0f GiB (npuMemSize) + runtime "
        "%.1f GiB exceed the %.0f GiB of one %s (worldSize %d)",
        weights_per_card, mem, profile.runtime_overhead_gib, profile.device_memory_gib,
        profile.device, config.world_size));
  }
  absl::StatusOr<KvCacheLayout> kv =
      ComputeKvCache(profile, config.world_size, mem, config.cache_block_size);
  if (!kv.ok()) return kv.status();
  int64_t per_seq = BlocksFor(config.max_seq_len, config.cache_block_size);
  if (kv->usable_blocks < per_seq) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "NPU out of memory: the KV cache of %.0f GiB holds %d blocks of %d tokens, one sequence "
        "of maxSeqLen %d needs %d",
        mem, kv->usable_blocks, config.cache_block_size, config.max_seq_len, per_seq));
  }
  return kv;
}

}  // namespace crest::sim
