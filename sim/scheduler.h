// The performance model's core: MindIE's iteration-level continuous batching
// in virtual time, with no clocks or threads. Each Step() runs one engine
// iteration (a prefill batch or a decode step over the running batch) and
// returns its simulated duration and the tokens it produced. Deterministic.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"

#include "sim/profile.h"

namespace crest::sim {

struct SchedulerConfig {
  int max_batch_size = 200;
  int max_prefill_batch_size = 50;
  int max_prefill_tokens = 8192;
  int block_size = 128;
  int64_t num_blocks = 0;  // usable KV blocks
  bool support_select_batch = false;
  double prefill_time_ms_per_req = 150;
  double decode_time_ms_per_req = 50;
};

struct SequenceSpec {
  uint64_t id = 0;
  int prompt_tokens = 1;
  int output_tokens = 1;  // tokens to generate (already capped), >= 1
};

enum class StepKind { kNone, kPrefill, kDecode };

struct TokenEvent {
  uint64_t id = 0;
  int generated = 0;  // tokens generated so far, this one included
  bool finished = false;
};

struct StepResult {
  StepKind kind = StepKind::kNone;
  StepCounts counts;       // what the step did
  double duration_ms = 0;  // their time: StepTimeModel::Ms(counts)
  int batch_size = 0;
  std::vector<TokenEvent> tokens;
  std::vector<uint64_t> preempted;
};

struct SchedulerStats {
  int64_t prefill_steps = 0;
  int64_t decode_steps = 0;
  int64_t preemptions = 0;
  int64_t generated_tokens = 0;
  int64_t recomputed_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, const StepTimeModel& timing);

  // Queues a sequence. INVALID_ARGUMENT when it could never fit the cache.
  absl::Status Add(const SequenceSpec& spec);
  // Drops a waiting or running sequence (client gone); false if unknown.
  bool Cancel(uint64_t id);

  // Runs one iteration; kind kNone when there is nothing to do.
  StepResult Step();

  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int64_t used_blocks() const { return used_blocks_; }
  const SchedulerConfig& config() const { return config_; }
  const SchedulerStats& stats() const { return stats_; }

 private:
  struct Seq {
    SequenceSpec spec;
    int generated = 0;
    int64_t blocks = 0;
    int64_t Tokens() const { return spec.prompt_tokens + generated; }
  };

  bool CanAdmitFront() const;
  bool ChoosePrefill(bool can_prefill);
  StepResult Prefill();
  StepResult Decode();
  int64_t FreeBlocks() const { return config_.num_blocks - used_blocks_; }

  SchedulerConfig config_;
  StepTimeModel timing_;
  std::deque<Seq> waiting_;   // FCFS; preempted sequences go back to the front
  std::vector<Seq> running_;  // in admission order: the back is the newest
  int64_t used_blocks_ = 0;
  double accumulated_decode_waste_ms_ = 0;  // select-batch bookkeeping
  SchedulerStats stats_;
};

}  // namespace crest::sim
