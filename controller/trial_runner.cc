#include "controller/trial_runner.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "controller/search/trial_outcomes.h"
#include "controller/search/trial_trust.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;
using crest::v1::TrialStatus;

// The agent waits up to the spec's start timeout; the call gets a margin on top.
absl::Duration StartCallTimeout(const crest::v1::CampaignSpec& spec) {
  const auto& d = spec.limits().start_timeout();
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos()) + absl::Seconds(10);
}

absl::Duration BenchmarkCallTimeout(const crest::v1::CampaignSpec& spec) {
  const auto& d = spec.limits().benchmark_timeout();
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// A start at the daemon's defaults: pinned, replacing whatever runs.
crest::v1::StartDaemonRequest StartRequest(const crest::v1::CampaignSpec& spec) {
  crest::v1::StartDaemonRequest start;
  *start.mutable_pinning() = spec.host().pin();
  start.set_replace_running(true);
  *start.mutable_start_timeout() = spec.limits().start_timeout();
  return start;
}

// The ScheduleConfig overrides of a trial, in the order config.json lists them.
void AddOverrides(const crest::v1::TrialParameters& p, crest::v1::StartDaemonRequest* start) {
  auto add_int = [&](const char* key, int64_t v) {
    auto* o = start->add_overrides();
    o->set_key(key);
    o->set_int_value(v);
  };
  add_int("maxBatchSize", p.max_batch_size());
  add_int("maxPrefillBatchSize", p.max_prefill_batch_size());
  if (p.support_select_batch()) {
    auto* o = start->add_overrides();
    o->set_key("supportSelectBatch");
    o->set_bool_value(true);
    add_int("prefillTimeMsPerReq", static_cast<int64_t>(p.prefill_time_ms_per_req()));
    add_int("decodeTimeMsPerReq", static_cast<int64_t>(p.decode_time_ms_per_req()));
  }
}

// `scale`: the node's sim time scale; a rate-search run's rate is in the
// daemon's time, so a daemon running `scale` times faster gets it `scale` times.
crest::v1::BenchmarkSpec BenchmarkFor(const crest::v1::CampaignSpec& spec, const Trial& trial,
                                      double scale) {
  crest::v1::BenchmarkSpec bench;
  const auto& cl = spec.client();
  bench.set_api(cl.api());
  bench.set_task_kind(cl.task_kind());
  *bench.mutable_dataset() = cl.dataset();
  bench.set_model_name(trial.model());
  bench.set_concurrency(trial.parameters().concurrency());
  if (trial.rate_search()) {
    bench.set_request_rate(trial.parameters().request_rate() * (scale > 0 ? scale : 1));
  } else if (cl.mode() == crest::v1::CLIENT_MODE_RATE) {
    bench.set_request_rate(cl.request_rate());
  }
  bench.set_distribution(cl.distribution());
  bench.set_request_count(cl.request_count());
  bench.set_max_output_len(cl.max_output_len());
  bench.set_warmup_requests(cl.warmup_requests());
  bench.set_seed(1);
  return bench;
}

Trial Ended(Trial trial, TrialStatus status, const std::string& reason) {
  trial.set_status(status);
  trial.set_reason(reason);
  return trial;
}

}  // namespace

TrialRunner::TrialRunner(std::shared_ptr<AgentClient> client, std::string node, uint32_t slot,
                         AgentRegistry* registry, absl::Duration call_timeout, JobStop* stop)
    : client_(std::move(client)),
      node_(std::move(node)),
      slot_(slot),
      registry_(registry),
      call_timeout_(call_timeout),
      stop_(stop) {}

TrialStatus TrialRunner::Classify(const absl::Status& status, std::string* reason) {
  switch (stop_->reason()) {
    case StopReason::kCampaignCancelled:
      *reason = "campaign cancelled";
      return crest::v1::TRIAL_CANCELLED;
    case StopReason::kShutdown:
      *reason = "controller shut down while the trial ran";
      return crest::v1::TRIAL_INTERRUPTED;
    case StopReason::kNodeLost:
      *reason = absl::StrCat("node ", node_, " lost (missed heartbeats)");
      return crest::v1::TRIAL_INTERRUPTED;
    case StopReason::kNone:
      break;
  }
  if (status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kCancelled) {
    *reason = absl::StrCat("node ", node_, " unreachable: ", status.message());
    registry_->MarkLost(node_, std::string(status.message()));
    return crest::v1::TRIAL_INTERRUPTED;
  }
  *reason = std::string(status.message());
  return crest::v1::TRIAL_FAILED;
}

Trial TrialRunner::EndWithError(Trial trial, const absl::Status& status, const std::string& what) {
  std::string reason;
  TrialStatus outcome = Classify(status, &reason);
  if (outcome == crest::v1::TRIAL_FAILED) reason = absl::StrCat(what, ": ", reason);
  // A lost node is not waited for; everything else stops its daemon cleanly.
  if (outcome != crest::v1::TRIAL_INTERRUPTED || registry_->IsReady(node_)) {
    client_->StopDaemon(slot_, call_timeout_).IgnoreError();
  }
  return Ended(std::move(trial), outcome, reason);
}

ProbeResult TrialRunner::Probe(const crest::v1::CampaignSpec& spec) {
  ProbeResult probe;
  crest::v1::StartDaemonRequest start = StartRequest(spec);
  start.set_slot(slot_);
  auto outcome = client_->StartDaemon(start, StartCallTimeout(spec), stop_->signal());
  if (!outcome.ok()) {
    Classify(outcome.status(), &probe.reason);
    return probe;
  }
  client_->StopDaemon(slot_, call_timeout_).IgnoreError();
  if (outcome->ready && outcome->ready_event.npu_block_num() > 0) {
    probe.npu_block_num = outcome->ready_event.npu_block_num();
    return probe;
  }
  if (outcome->ready) {
    probe.block_num_unknown = true;
    probe.reason = outcome->ready_event.npu_block_num_unknown().empty()
                       ? "the daemon reported no npuBlockNum"
                       : outcome->ready_event.npu_block_num_unknown();
    return probe;
  }
  probe.reason = outcome->failed_event.reason();
  probe.daemon_failed = stop_->reason() == StopReason::kNone;
  return probe;
}

std::optional<Trial> TrialRunner::Prepare(const crest::v1::CampaignSpec& spec, Trial* trial,
                                          bool tune_host) {
  if (tune_host) {
    crest::v1::ApplyHostTuningRequest req;
    req.set_governor(spec.host().governor());
    req.set_thp(spec.host().thp());
    auto reply = client_->ApplyHostTuning(req, call_timeout_);
    if (!reply.ok()) return EndWithError(std::move(*trial), reply.status(), "host tuning");
    for (const auto& r : reply->results()) {
      spdlog::info("campaign {}: {} on {}: {} -> {} ({})", trial->campaign_id(), r.setting(), node_,
                   r.previous(), r.current(), r.message());
    }
  }
  crest::v1::StartDaemonRequest start = StartRequest(spec);
  start.set_slot(slot_);
  AddOverrides(trial->parameters(), &start);
  auto outcome = client_->StartDaemon(start, StartCallTimeout(spec), stop_->signal());
  if (!outcome.ok()) {
    return EndWithError(std::move(*trial), outcome.status(), "starting the daemon");
  }
  if (!outcome->ready) {
    const auto& f = outcome->failed_event;
    client_->StopDaemon(slot_, call_timeout_).IgnoreError();
    if (stop_->signal()->cancelled()) {
      return EndWithError(std::move(*trial), absl::CancelledError("stopped"), "");
    }
    return Ended(std::move(*trial),
                 f.kind() == crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY ? crest::v1::TRIAL_INFEASIBLE
                                                                     : crest::v1::TRIAL_FAILED,
                 absl::StrCat("daemon did not start (", crest::v1::DaemonFailure_Name(f.kind()),
                              "): ", f.reason()));
  }
  block_num_ = outcome->ready_event.npu_block_num();
  return std::nullopt;
}

Trial TrialRunner::Measure(
    const crest::v1::CampaignSpec& spec, Trial trial,
    const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress, bool keep_daemon) {
  trial.set_npu_block_num(block_num_);
  const double scale = registry_->options().time_scales.For(node_);
  auto result = client_->RunBenchmark(slot_, BenchmarkFor(spec, trial, scale),
                                      BenchmarkCallTimeout(spec), on_progress, stop_->signal());
  if (!result.ok()) return EndWithError(std::move(trial), result.status(), "benchmark");
  if (!keep_daemon) client_->StopDaemon(slot_, call_timeout_).IgnoreError();
  if (stop_->signal()->cancelled()) {
    return EndWithError(std::move(trial), absl::CancelledError("stopped"), "");
  }
  *trial.mutable_result() = *result;
  // The operator's scale for this node (--sim-time-scale), never a label the
  // agent sets about itself: a label would let an agent multiply its results.
  NormalizeTimeScale(trial.mutable_result(), scale);
  for (std::string& flag : TrustFlags(trial)) trial.add_flags(std::move(flag));
  if (!result->daemon_gone().empty()) {
    return Ended(std::move(trial), crest::v1::TRIAL_FAILED,
                 absl::StrCat("the daemon died during the benchmark: ", result->daemon_gone(), " (",
                              result->succeeded(), " requests had succeeded)"));
  }
  if (result->succeeded() == 0) {
    std::vector<std::string> why;
    for (const auto& [k, v] : result->failures()) why.push_back(absl::StrCat(k, " x", v));
    return Ended(std::move(trial), crest::v1::TRIAL_FAILED,
                 absl::StrCat("no request succeeded (", absl::StrJoin(why, ", "), ")"));
  }
  return Ended(std::move(trial), crest::v1::TRIAL_OK, "");
}

Trial TrialRunner::Run(
    const crest::v1::CampaignSpec& spec, Trial trial, bool tune_host,
    const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress) {
  if (auto ended = Prepare(spec, &trial, tune_host)) return *std::move(ended);
  return Measure(spec, std::move(trial), on_progress, /*keep_daemon=*/false);
}

void TrialRunner::RunSweep(
    const crest::v1::CampaignSpec& spec, Trial first, bool tune_host,
    const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
    const std::function<std::optional<Trial>(Trial ended)>& next) {
  if (auto ended = Prepare(spec, &first, tune_host)) {
    next(*std::move(ended));
    return;
  }
  std::optional<Trial> trial = std::move(first);
  while (trial) {
    // The daemon stays up between runs; a run that fails stops it itself.
    trial = next(Measure(spec, *std::move(trial), on_progress, /*keep_daemon=*/true));
  }
  // A lost node is not waited for: the controller stops what it left once
  // the node is heard from again.
  if (registry_->IsReady(node_)) client_->StopDaemon(slot_, call_timeout_).IgnoreError();
}

}  // namespace crest::controller
