// The KV-cache sizing MindIE does at start-up: how many blocks of
// cacheBlockSize tokens fit in npuMemSize GiB per card, and the start-up
// memory checks that make the real daemon fail with "NPU out of memory".
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

#include "sim/config.h"
#include "sim/profile.h"

namespace crest::sim {

struct KvCacheLayout {
  double npu_mem_gib = 0;       // KV-cache memory per card (npuMemSize, or the auto value)
  int kv_heads_per_card = 0;    // ceil(num_kv_heads / worldSize)
  int64_t bytes_per_block = 0;  // layers * cbs * kv_heads_per_card * head_dim * dtype * 2
  int64_t computed_blocks = 0;  // floor(npu_mem / bytes_per_block): the logged npuBlockNum
  int64_t usable_blocks = 0;    // computed_blocks - 1: the engine keeps one in reserve
};

// Blocks for `npu_mem_gib` GiB per card. INVALID_ARGUMENT for impossible sizes.
absl::StatusOr<KvCacheLayout> ComputeKvCache(const Profile& profile, int world_size,
                                             double npu_mem_gib, int cache_block_size);

// The daemon's start-up sizing: npuMemSize (or, for -1, floor((device memory -
// runtime - weights/card) * 0.8)), then the checks. RESOURCE_EXHAUSTED whose
// message contains "NPU out of memory" when the weights plus the KV cache do
// not fit the card, or the cache cannot hold one sequence of maxSeqLen tokens;
// INVALID_ARGUMENT when worldSize is outside the profile's range.
absl::StatusOr<KvCacheLayout> PlanKvCache(const Profile& profile, const SimConfig& config);

// ceil(tokens / block_size).
inline int64_t BlocksFor(int64_t tokens, int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

}  // namespace crest::sim
