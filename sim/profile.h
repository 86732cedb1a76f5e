// A model + hardware profile: the numbers that make mindie-sim behave like a
// given model on a given NPU (architecture for the KV-cache size, weights for
// the memory check, step-time coefficients, output-length distributions per
// workload, run-to-run noise). Loaded from the JSON files in sim/profiles/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crest::sim {

// The step-time coefficients: StepTimeModel's fields, StepCounts' fields.
constexpr size_t kStepCoefficients = 7;

// What engine iterations did, in the units of StepTimeModel's coefficients
// (one field per coefficient). Their time is the dot product
// (StepTimeModel::Ms), so the time of any set of steps is linear in the
// coefficients: what lets a profile be fitted to measured runs.
struct StepCounts {
  double decode_steps = 0;
  double decode_seqs = 0;            // running sequences, summed over decode steps
  double decode_context_tokens = 0;  // live context tokens, summed over decode steps
  double prefill_steps = 0;
  double prefill_seqs = 0;
  double prefill_tokens = 0;  // prompt (or recomputed) tokens
  double preempted_seqs = 0;

  std::array<double, kStepCoefficients> AsArray() const;  // in field order
  StepCounts& operator+=(const StepCounts& o);
  StepCounts& operator-=(const StepCounts& o);
  StepCounts& operator*=(double factor);
};

// Step time in milliseconds of one engine iteration, at the profile's
// reference tensor-parallel degree (see Profile::TimingAt for other degrees).
struct StepTimeModel {
  double decode_base_ms = 0;               // fixed cost of one decode step
  double decode_per_seq_ms = 0;            // per running sequence
  double decode_per_context_token_ms = 0;  // per live context token (attention reads)
  double prefill_base_ms = 0;
  double prefill_per_seq_ms = 0;
  double prefill_per_token_ms = 0;  // per prompt (or recomputed) token
  // Host-side cost of preempting one sequence (freeing its blocks, re-queueing
  // it, rebuilding its state for the recompute), paid in the step that preempts.
  double preempt_overhead_ms = 0;

  // The coefficients in StepCounts' order, and back.
  std::array<double, kStepCoefficients> AsArray() const;
  static StepTimeModel FromArray(const std::array<double, kStepCoefficients>& a);

  // The time of the steps `c` counts.
  double Ms(const StepCounts& c) const {
    return decode_base_ms * c.decode_steps + decode_per_seq_ms * c.decode_seqs +
           decode_per_context_token_ms * c.decode_context_tokens +
           prefill_base_ms * c.prefill_steps + prefill_per_seq_ms * c.prefill_seqs +
           prefill_per_token_ms * c.prefill_tokens + preempt_overhead_ms * c.preempted_seqs;
  }
};

// Natural output length (before max_tokens / maxIterTimes caps) of the model
// on one workload: log-normal with the given median and sigma, at least `min`.
struct OutputLengthDistribution {
  double median = 100;
  double sigma = 0.5;
  int min = 1;
};

struct Profile {
  std::string name;                      // e.g. "llama3-8b-910b"
  std::vector<std::string> model_names;  // modelName values that select it
  // Hardware (per card).
  std::string device;
  double device_memory_gib = 64;
  double runtime_overhead_gib = 3;  // HCCL buffers, workspace, graph memory
  // Model architecture.
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  // Bytes per cached K/V element as MindIE's block accounting sees it. The
  // shipped fp16 profiles use 1: MindIE's published figure (17 GiB, cbs 128 ->
  // 2176 blocks for LLaMA3-8B, i.e. 8 MiB per block) is half of what 2-byte
  // K plus V would give; docs/simulator.md explains.
  int kv_dtype_bytes = 1;
  // Optional (default 1): multiplies the bytes of one block. A fitted
  // profile (profile_fit.h) sets it so that the block count the daemon
  // reported at the measured npuMemSize comes out exactly.
  double kv_block_scale = 1;
  double weights_gib = 0;  // all cards together
  int min_world_size = 1;
  int max_world_size = 8;
  // Optional (default false). The weights quantise the KV cache to int8:
  // MindIE decodes with the AclNN attention backend and warns at start that
  // it may run out of memory. A multimodal model: with npuMemSize -1 MindIE
  // warns it may run out of memory. Both warnings are harmless (startup_lines.h).
  bool kv_cache_int8 = false;
  bool multimodal = false;
  // Timing.
  int reference_world_size = 1;
  double tp_scaling_exponent = 0.8;  // step time ~ (reference / worldSize)^exponent
  StepTimeModel timing;
  double startup_seconds = 30;  // model loading, before scaling
  double noise_cv = 0.02;
  // Tokenizer approximation: tokens the chat template and request framing add.
  int prompt_template_tokens = 0;
  std::string default_workload;
  std::map<std::string, OutputLengthDistribution> workloads;

  // Step-time coefficients at `world_size` cards.
  StepTimeModel TimingAt(int world_size) const;
};

absl::StatusOr<Profile> ParseProfile(const std::string& json_text);
absl::StatusOr<Profile> LoadProfileFile(const std::string& path);

// `name_or_file`: a path (contains '/' or ends in .json), a profile name, or
// empty to choose by `model_name` (case-insensitive match against
// model_names) among the *.json files in `dir`.
absl::StatusOr<Profile> FindProfile(const std::string& dir, const std::string& name_or_file,
                                    const std::string& model_name);

// The documented tokenizer approximation (see docs/simulator.md): letter runs
// count one token per started 7 letters, digit runs one per started 3 digits
// (LLaMA-3 splits numbers in groups of three), every other non-space character
// one token; plus the profile's prompt_template_tokens.
int CountPromptTokens(const std::string& text, int template_tokens);

// The model's natural output length for `prompt` (deterministic: the same
// prompt always gives the same length, as greedy decoding does).
int NaturalOutputLength(const OutputLengthDistribution& dist, const std::string& prompt);

}  // namespace crest::sim
