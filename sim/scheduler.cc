#include "sim/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

#include "sim/kv_cache.h"

namespace crest::sim {

Scheduler::Scheduler(const SchedulerConfig& config, const StepTimeModel& timing)
    : config_(config), timing_(timing) {}

absl::Status Scheduler::Add(const SequenceSpec& spec) {
  if (spec.prompt_tokens < 1 || spec.output_tokens < 1) {
    return absl::InvalidArgumentError("sequence needs >= 1 prompt and output token");
  }
  int64_t need = BlocksFor(spec.prompt_tokens + spec.output_tokens, config_.block_size);
  if (need > config_.num_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence needs ", need, " KV blocks, the cache has ", config_.num_blocks));
  }
  waiting_.push_back(Seq{spec});
  return absl::OkStatus();
}

bool Scheduler::Cancel(uint64_t id) {
  auto same = [id](const Seq& s) { return s.spec.id == id; };
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), same); it != waiting_.end()) {
    waiting_.erase(it);
    return true;
  }
  if (auto it = std::find_if(running_.begin(), running_.end(), same); it != running_.end()) {
    used_blocks_ -= it->blocks;
    running_.erase(it);
    return true;
  }
  return false;
}

bool Scheduler::CanAdmitFront() const {
  if (waiting_.empty() || running() >= config_.max_batch_size) return false;
  const Seq& s = waiting_.front();
  return BlocksFor(s.Tokens() + 1, config_.block_size) <= FreeBlocks();
}

// MindIE: without supportSelectBatch a possible prefill always goes first.
// With it, a prefill makes every running sequence wait prefillTimeMsPerReq,
// while each decode step with free batch slots wastes decodeTimeMsPerReq per
// empty slot; prefill once the accumulated waste exceeds the wait it causes.
bool Scheduler::ChoosePrefill(bool can_prefill) {
  if (!can_prefill) return false;
  if (!config_.support_select_batch || running_.empty()) {
    accumulated_decode_waste_ms_ = 0;
    return true;
  }
  auto decode_reqs = static_cast<double>(running_.size());
  double prefill_wait_ms = config_.prefill_time_ms_per_req * decode_reqs;
  accumulated_decode_waste_ms_ +=
      config_.decode_time_ms_per_req * (config_.max_batch_size - decode_reqs);
  if (prefill_wait_ms > accumulated_decode_waste_ms_) return false;
  accumulated_decode_waste_ms_ = 0;
  return true;
}

StepResult Scheduler::Step() {
  if (!HasWork()) return {};
  bool can_prefill = CanAdmitFront();
  if (ChoosePrefill(can_prefill)) return Prefill();
  if (!running_.empty()) return Decode();
  return {};  // unreachable: Add() guarantees a lone sequence fits
}

StepResult Scheduler::Prefill() {
  StepResult r;
  r.kind = StepKind::kPrefill;
  int64_t tokens = 0;
  int seqs = 0;
  while (!waiting_.empty() && seqs < config_.max_prefill_batch_size &&
         running() < config_.max_batch_size) {
    Seq& s = waiting_.front();
    int64_t context = s.Tokens();
    // The first sequence always goes, even a recomputed one longer than the cap.
    if (seqs > 0 && tokens + context > config_.max_prefill_tokens) break;
    int64_t need = BlocksFor(context + 1, config_.block_size);
    if (need > FreeBlocks()) break;
    if (s.generated > 0) stats_.recomputed_tokens += context;
    tokens += context;
    ++seqs;
    s.generated += 1;  // prefill emits the first (or next) token
    s.blocks = need;
    used_blocks_ += need;
    bool finished = s.generated >= s.spec.output_tokens;
    r.tokens.push_back({s.spec.id, s.generated, finished});
    if (finished) {
      used_blocks_ -= s.blocks;
    } else {
      running_.push_back(s);
    }
    waiting_.pop_front();
  }
  r.batch_size = seqs;
  r.counts.prefill_steps = 1;
  r.counts.prefill_seqs = seqs;
  r.counts.prefill_tokens = static_cast<double>(tokens);
  r.duration_ms = timing_.Ms(r.counts);
  stats_.prefill_steps += 1;
  stats_.generated_tokens += seqs;
  return r;
}

StepResult Scheduler::Decode() {
  StepResult r;
  r.kind = StepKind::kDecode;
  int64_t need = 0;
  for (const Seq& s : running_) need += BlocksFor(s.Tokens() + 1, config_.block_size) - s.blocks;
  // Out of blocks: preempt by recompute, newest first (as vLLM and MindIE do).
  // Pushing each victim to the front keeps the oldest victim first in line.
  while (need > FreeBlocks() && !running_.empty()) {
    Seq victim = running_.back();
    running_.pop_back();
    need -= BlocksFor(victim.Tokens() + 1, config_.block_size) - victim.blocks;
    used_blocks_ -= victim.blocks;
    victim.blocks = 0;
    r.preempted.push_back(victim.spec.id);
    stats_.preemptions += 1;
    waiting_.push_front(victim);
  }
  int64_t context = 0;
  for (Seq& s : running_) {
    context += s.Tokens();
    s.generated += 1;
    int64_t blocks = BlocksFor(s.Tokens(), config_.block_size);
    used_blocks_ += blocks - s.blocks;
    s.blocks = blocks;
    bool finished = s.generated >= s.spec.output_tokens;
    r.tokens.push_back({s.spec.id, s.generated, finished});
    if (finished) used_blocks_ -= s.blocks;
  }
  r.batch_size = running();
  if (!running_.empty()) {
    r.counts.decode_steps = 1;
    r.counts.decode_seqs = running();
    r.counts.decode_context_tokens = static_cast<double>(context);
  }
  r.counts.preempted_seqs = static_cast<double>(r.preempted.size());
  r.duration_ms = timing_.Ms(r.counts);
  std::erase_if(running_, [](const Seq& s) { return s.generated >= s.spec.output_tokens; });
  stats_.decode_steps += 1;
  stats_.generated_tokens += r.batch_size;
  return r;
}

}  // namespace crest::sim
