#include "sim/profile_fit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "sim/kv_cache.h"

namespace crest::sim {
namespace {

std::string PointLabel(const MeasuredPoint& p) {
  return absl::StrCat("maxBatchSize ", p.max_batch_size, " (Concurrency ", p.concurrency, ")");
}

absl::Status CheckPoint(const MeasuredPoint& p) {
  if (p.max_batch_size < 1 || p.max_prefill_batch_size < 1 || p.concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        PointLabel(p), ": maxBatchSize, maxPrefillBatchSize and Concurrency must be >= 1, got ",
        p.max_batch_size, ", ", p.max_prefill_batch_size, ", ", p.concurrency));
  }
  if (p.runs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(PointLabel(p), ": ", p.runs, " runs (expected >= 1)"));
  }
  for (const auto& [name, v] :
       {std::pair{"GenerateSpeed", p.generate_speed}, std::pair{"FirstTokenTime", p.first_token_ms},
        std::pair{"DecodeTime", p.decode_ms}}) {
    if (v < 0 || !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(PointLabel(p), ": ", name, " ", v, " (expected >= 0)"));
    }
  }
  return absl::OkStatus();
}

SchedulerConfig ConfigOf(const MeasuredPoint& p, const FitWorkload& w, int64_t blocks) {
  SchedulerConfig c;
  c.max_batch_size = p.max_batch_size;
  c.max_prefill_batch_size = p.max_prefill_batch_size;
  c.max_prefill_tokens = w.max_prefill_tokens;
  c.block_size = w.cache_block_size;
  c.num_blocks = blocks;
  c.support_select_batch = p.support_select_batch;
  if (p.support_select_batch) {
    c.prefill_time_ms_per_req = p.prefill_time_ms_per_req;
    c.decode_time_ms_per_req = p.decode_time_ms_per_req;
  }
  return c;
}

PointPrediction PredictionOf(const WorkloadResult& r, const StepTimeModel& timing) {
  PointPrediction out;
  const double ms = timing.Ms(r.counts);
  out.generate_speed = ms > 0 ? static_cast<double>(r.generated_tokens) / (ms / 1000.0) : 0;
  out.first_token_ms = timing.Ms(r.first_token_counts);
  out.decode_ms = timing.Ms(r.decode_counts);
  out.preemptions = r.stats.preemptions;
  return out;
}

}  // namespace

absl::StatusOr<std::vector<WorkloadRequest>> RequestsFor(const Profile& profile,
                                                         const std::string& workload,
                                                         const std::vector<std::string>& prompts,
                                                         int max_output) {
  const std::string name = workload.empty() ? profile.default_workload : workload;
  auto it = profile.workloads.find(name);
  if (it == profile.workloads.end()) {
    std::vector<std::string> known;
    for (const auto& [k, v] : profile.workloads) known.push_back(k);
    return absl::NotFoundError(absl::StrCat("profile ", profile.name, " has no workload \"", name,
                                            "\" (it has: ", absl::StrJoin(known, ", "), ")"));
  }
  if (max_output < 1) {
    return absl::InvalidArgumentError(absl::StrCat("MaxOutputLen ", max_output, ": expected >= 1"));
  }
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts to send");
  std::vector<WorkloadRequest> out;
  out.reserve(prompts.size());
  for (const std::string& q : prompts) {
    out.push_back({CountPromptTokens(q, profile.prompt_template_tokens),
                   std::min(NaturalOutputLength(it->second, q), max_output)});
  }
  return out;
}

absl::StatusOr<int64_t> UsableBlocks(const Profile& profile, const FitWorkload& w) {
  if (w.npu_block_num > 0) return w.npu_block_num - 1;
  if (w.npu_mem_gib <= 0) {
    return absl::FailedPreconditionError(
        "no KV capacity: the runs report no npuBlockNum and npuMemSize is not given");
  }
  absl::StatusOr<KvCacheLayout> kv =
      ComputeKvCache(profile, w.world_size, w.npu_mem_gib, w.cache_block_size);
  if (!kv.ok()) return kv.status();
  return kv->usable_blocks;
}

MeasuredPoint PracticePoint(int max_batch_size) {
  MeasuredPoint p;
  p.max_batch_size = max_batch_size;
  p.max_prefill_batch_size = std::max(1, max_batch_size / 2);
  p.concurrency = std::max(1, max_batch_size - 1);
  return p;
}

absl::StatusOr<PointPrediction> Predict(const Profile& profile, const FitWorkload& w,
                                        const MeasuredPoint& point) {
  if (absl::Status s = CheckPoint(point); !s.ok()) return s;
  absl::StatusOr<int64_t> blocks = UsableBlocks(profile, w);
  if (!blocks.ok()) return blocks.status();
  if (w.requests.empty()) return absl::InvalidArgumentError("no requests to send");
  const StepTimeModel timing = profile.TimingAt(w.world_size);
  return PredictionOf(
      SimulateWorkload(ConfigOf(point, w, *blocks), timing, w.requests, point.concurrency, 0, 1),
      timing);
}

absl::StatusOr<ProfileFit> FitProfile(const Profile& start, const FitWorkload& w,
                                      const std::vector<MeasuredPoint>& points) {
  if (points.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        points.size(), " measured point", points.size() == 1 ? "" : "s",
        ": a fit needs at least two (three for the leave-one-out error), since one point "
        "cannot separate a step's fixed cost from its per-sequence cost"));
  }
  if (w.requests.empty()) return absl::InvalidArgumentError("no requests to send");
  for (const MeasuredPoint& p : points) {
    if (absl::Status s = CheckPoint(p); !s.ok()) return s;
    if (p.generate_speed <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(PointLabel(p), ": GenerateSpeed ", p.generate_speed, " (expected > 0)"));
    }
  }
  absl::StatusOr<int64_t> blocks = UsableBlocks(start, w);
  if (!blocks.ok()) return blocks.status();
  const StepTimeModel start_timing = start.TimingAt(w.world_size);
  std::vector<WorkloadResult> plays;
  std::vector<TimingObservation> observations;
  for (size_t i = 0; i < points.size(); ++i) {
    const MeasuredPoint& p = points[i];
    WorkloadResult r =
        SimulateWorkload(ConfigOf(p, w, *blocks), start_timing, w.requests, p.concurrency, 0, 1);
    const auto point = static_cast<int>(i);
    const double weight = p.runs;
    observations.push_back({absl::StrCat(PointLabel(p), " GenerateSpeed"), r.counts,
                            static_cast<double>(r.generated_tokens) / p.generate_speed * 1000.0,
                            weight, point});
    if (p.first_token_ms > 0) {
      observations.push_back({absl::StrCat(PointLabel(p), " FirstTokenTime"), r.first_token_counts,
                              p.first_token_ms, weight, point});
    }
    if (p.decode_ms > 0) {
      observations.push_back({absl::StrCat(PointLabel(p), " DecodeTime"), r.decode_counts,
                              p.decode_ms, weight, point});
    }
    plays.push_back(r);
  }
  absl::StatusOr<TimingFit> timing = FitStepTimes(observations, start_timing);
  if (!timing.ok()) return timing.status();

  ProfileFit fit;
  fit.timing = *std::move(timing);
  fit.profile = start;
  fit.profile.reference_world_size = w.world_size;
  fit.profile.timing = fit.timing.timing;
  for (const WorkloadResult& r : plays) {
    fit.predicted.push_back(PredictionOf(r, fit.profile.timing));
  }
  if (w.npu_block_num > 0 && w.npu_mem_gib > 0) {
    // The scale that makes the start's sizing of npuMemSize give the
    // reported count: bytes per block in (memory / (N + 1), memory / N].
    Profile unscaled = start;
    unscaled.kv_block_scale = 1;
    absl::StatusOr<KvCacheLayout> raw =
        ComputeKvCache(unscaled, w.world_size, w.npu_mem_gib, w.cache_block_size);
    if (!raw.ok()) return raw.status();
    const double mem_bytes = std::floor(w.npu_mem_gib * 1024.0 * 1024.0 * 1024.0);
    const double target = std::floor(mem_bytes / (static_cast<double>(w.npu_block_num) + 0.5));
    fit.profile.kv_block_scale = target / static_cast<double>(raw->bytes_per_block);
    absl::StatusOr<KvCacheLayout> check =
        ComputeKvCache(fit.profile, w.world_size, w.npu_mem_gib, w.cache_block_size);
    if (!check.ok()) return check.status();
    if (check->computed_blocks != w.npu_block_num) {
      return absl::InternalError(absl::StrCat("KV scale ", fit.profile.kv_block_scale, " gives ",
                                              check->computed_blocks, " blocks, not ",
                                              w.npu_block_num));
    }
    fit.kv_fitted = true;
    fit.kv_basis = absl::StrCat("npuBlockNum ", w.npu_block_num, " at npuMemSize ", w.npu_mem_gib,
                                " GiB: kv_block_scale ", fit.profile.kv_block_scale,
                                " of the architecture's block size");
  } else if (w.npu_block_num > 0) {
    fit.kv_basis = absl::StrCat("npuBlockNum ", w.npu_block_num,
                                " used for the fit; npuMemSize not given, so the profile keeps "
                                "its own sizing (kv_block_scale not fitted)");
  } else {
    fit.kv_basis = absl::StrCat("no npuBlockNum reported: the profile's sizing of npuMemSize ",
                                w.npu_mem_gib, " GiB (", *blocks + 1, " blocks)");
  }
  return fit;
}

absl::StatusOr<PredictedCurve> PredictCurve(const Profile& profile, const FitWorkload& w, int lo,
                                            int hi, int points) {
  absl::StatusOr<int64_t> blocks = UsableBlocks(profile, w);
  if (!blocks.ok()) return blocks.status();
  if (w.requests.empty()) return absl::InvalidArgumentError("no requests to send");
  if (lo == 0 && hi == 0) {
    double tokens = 0;
    for (const WorkloadRequest& r : w.requests) tokens += r.prompt_tokens + r.output_tokens;
    tokens /= static_cast<double>(w.requests.size());
    const double fill = static_cast<double>(*blocks * w.cache_block_size) / std::max(1.0, tokens);
    lo = 1;
    hi = std::max(2, static_cast<int>(std::ceil(3 * fill)));
  }
  if (lo < 1 || hi < lo || points < 2) {
    return absl::InvalidArgumentError(absl::StrCat("range [", lo, ", ", hi, "] with ", points,
                                                   " points: expected 1 <= lo <= hi"));
  }
  PredictedCurve out;
  out.lo = lo;
  out.hi = hi;
  out.npu_block_num = *blocks + 1;
  std::map<int, double> speed;
  auto at = [&](int b) -> absl::StatusOr<double> {
    auto it = speed.find(b);
    if (it != speed.end()) return it->second;
    absl::StatusOr<PointPrediction> p = Predict(profile, w, PracticePoint(b));
    if (!p.ok()) return p.status();
    return speed[b] = p->generate_speed;
  };
  const double step = static_cast<double>(hi - lo) / (points - 1);
  int best = lo;
  for (int i = 0; i < points; ++i) {
    const int b = lo + static_cast<int>(std::lround(step * i));
    absl::StatusOr<double> s = at(b);
    if (!s.ok()) return s.status();
    if (*s > speed[best]) best = b;
  }
  const int around = std::max(1, static_cast<int>(std::ceil(step)));
  const int center = best;
  for (int b = std::max(lo, center - around); b <= std::min(hi, center + around); ++b) {
    absl::StatusOr<double> s = at(b);
    if (!s.ok()) return s.status();
    if (*s > speed[best]) best = b;
  }
  out.curve.assign(speed.begin(), speed.end());
  out.peak_max_batch_size = best;
  out.peak_generate_speed = speed[best];
  return out;
}

nlohmann::json ProfileJson(const Profile& p) {
  nlohmann::json model = {{"num_layers", p.num_layers},
                          {"num_kv_heads", p.num_kv_heads},
                          {"head_dim", p.head_dim},
                          {"kv_dtype_bytes", p.kv_dtype_bytes},
                          {"weights_gib", p.weights_gib},
                          {"min_world_size", p.min_world_size},
                          {"max_world_size", p.max_world_size},
                          {"kv_cache_int8", p.kv_cache_int8},
                          {"multimodal", p.multimodal}};
  if (p.kv_block_scale != 1) model["kv_block_scale"] = p.kv_block_scale;
  nlohmann::json timing = {{"reference_world_size", p.reference_world_size},
                           {"tp_scaling_exponent", p.tp_scaling_exponent}};
  const auto values = p.timing.AsArray();
  for (size_t i = 0; i < kStepCoefficients; ++i) {
    timing[std::string(StepCoefficientNames()[i])] = values[i];
  }
  nlohmann::json workloads = nlohmann::json::object();
  for (const auto& [name, d] : p.workloads) {
    workloads[name] = {
        {"output_median", d.median}, {"output_sigma", d.sigma}, {"output_min", d.min}};
  }
  return {{"name", p.name},
          {"model_names", p.model_names},
          {"hardware",
           {{"device", p.device},
            {"memory_gib", p.device_memory_gib},
            {"runtime_overhead_gib", p.runtime_overhead_gib}}},
          {"model", std::move(model)},
          {"timing", std::move(timing)},
          {"startup_seconds", p.startup_seconds},
          {"noise_cv", p.noise_cv},
          {"tokenizer", {{"prompt_template_tokens", p.prompt_template_tokens}}},
          {"default_workload", p.default_workload},
          {"workloads", std::move(workloads)}};
}

}  // namespace crest::sim
