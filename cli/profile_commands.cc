// `crest profile fit|predict`: learning mindie-sim's model from a campaign
// (sim/profile_fit.h) and asking it about workloads nobody measured. Both
// run here, in virtual time; only `fit --campaign` talks to the controller.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/rpc_client.h"

#include "common/file_util.h"
#include "common/paths.h"
#include "common/status.h"
#include "controller/campaign_io/fit_workload.h"
#include "controller/campaign_io/report.h"
#include "controller/campaign_io/report_runs.h"
#include "crest/v1/controller.grpc.pb.h"
#include "sim/kv_cache.h"
#include "sim/profile_fit.h"

namespace crest::cli {
namespace {

using crest::v1::Controller;

using controller::ReportRuns;
using WorkloadFlags = controller::WorkloadShape;

void AddWorkloadFlags(CLI::App* cmd, WorkloadFlags* w, bool npu_mem_required) {
  cmd->add_option("--max-output", w->max_output, "MaxOutputLen of the benchmark (default 512)")
      ->check(CLI::PositiveNumber);
  auto* mem = cmd->add_option(
      "--npu-mem", w->npu_mem,
      npu_mem_required ? "npuMemSize, GiB per card"
                       : "npuMemSize the campaign ran with, GiB per card: with the reported "
                         "npuBlockNum it fixes the KV capacity per GiB, which a what-if "
                         "prediction at another npuMemSize needs");
  mem->check(CLI::PositiveNumber);
  if (npu_mem_required) mem->required();
  cmd->add_option("--world-size", w->world_size, "worldSize, cards per daemon (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cache-block-size", w->cache_block_size, "cacheBlockSize (default 128)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-prefill-tokens", w->max_prefill_tokens, "maxPrefillTokens (default 8192)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dataset", w->dataset, "GSM8K-style JSONL file (default: the shipped GSM8K)");
  cmd->add_option("--request-count", w->request_count,
                  "requests the benchmark measured (the spec's client.request_count), in the "
                  "dataset's order and round again; default: the dataset once")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--workload", w->workload,
                  "the profile's output-length distribution (default: the profile's)");
}

// A profile by name (the shipped ones) or file; empty: by model name.
absl::StatusOr<sim::Profile> StartProfile(const std::string& name, const std::string& model) {
  CREST_ASSIGN_OR_RETURN(std::string share, ShareDir());
  return sim::FindProfile(share + "/profiles", name, model);
}

const char* FitStatusName(sim::CoefficientFit s) {
  switch (s) {
    case sim::CoefficientFit::kFitted:
      return "fitted";
    case sim::CoefficientFit::kUndetermined:
      return "undetermined";
    case sim::CoefficientFit::kAtZero:
      return "at-zero";
  }
  return "?";
}

struct FitFlags {
  std::string report_file;
  std::string campaign;
  Endpoint endpoint{kControllerPeer};
  std::string model;
  std::string profile;
  std::string out_file;
  WorkloadFlags workload;
};

absl::StatusOr<nlohmann::json> LoadReport(const FitFlags& f) {
  if (!f.campaign.empty()) {
    CREST_ASSIGN_OR_RETURN(auto client, RpcClient<Controller>::Open(f.endpoint));
    crest::v1::GetCampaignReportRequest req;
    req.set_id(f.campaign);
    CREST_ASSIGN_OR_RETURN(crest::v1::CampaignReport report,
                           client.Call("profile fit --campaign", kQueryTimeout,
                                       &Controller::Stub::GetCampaignReport, req));
    return controller::ReportToJson(report);
  }
  CREST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(f.report_file));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("--report ", f.report_file, ": not JSON"));
  }
  return j;
}

// The fit as the output file's "fit" section and as text on stdout.
nlohmann::json FitSection(const ReportRuns& runs, const sim::ProfileFit& fit,
                          const std::string& start_name, std::string* text) {
  nlohmann::json points = nlohmann::json::array();
  absl::StrAppend(text, absl::StrFormat("fitted %s to campaign %s, model %s: %d trusted runs at "
                                        "%d points (%d runs left out)\n",
                                        start_name, runs.campaign, runs.model, runs.trusted_runs,
                                        runs.points.size(), runs.left_out_runs));
  absl::StrAppend(
      text, absl::StrFormat("  %-12s %-11s %5s %14s %14s %9s\n", "maxBatchSize", "Concurrency",
                            "runs", "GenerateSpeed", "fitted", "residual"));
  for (size_t i = 0; i < runs.points.size(); ++i) {
    const sim::MeasuredPoint& p = runs.points[i];
    const sim::PointPrediction& q = fit.predicted[i];
    const double residual = q.generate_speed / p.generate_speed - 1;
    absl::StrAppend(text, absl::StrFormat("  %-12d %-11d %5d %14.2f %14.2f %+8.2f%%\n",
                                          p.max_batch_size, p.concurrency, p.runs, p.generate_speed,
                                          q.generate_speed, 100 * residual));
    nlohmann::json jp = {{"maxBatchSize", p.max_batch_size},
                         {"concurrency", p.concurrency},
                         {"runs", p.runs},
                         {"GenerateSpeed", p.generate_speed},
                         {"fittedGenerateSpeed", q.generate_speed},
                         {"residual", residual}};
    if (p.first_token_ms > 0) {
      jp["FirstTokenTime"] = p.first_token_ms;
      jp["fittedFirstTokenTime"] = q.first_token_ms;
    }
    if (p.decode_ms > 0) {
      jp["DecodeTime"] = p.decode_ms;
      jp["fittedDecodeTime"] = q.decode_ms;
    }
    if (p.preemptions) jp["preemptions"] = *p.preemptions;
    jp["fittedPreemptions"] = q.preemptions;
    points.push_back(std::move(jp));
  }
  nlohmann::json coefficients = nlohmann::json::object();
  const auto values = fit.profile.timing.AsArray();
  std::vector<std::string> kept;
  for (size_t i = 0; i < sim::kStepCoefficients; ++i) {
    const std::string name(sim::StepCoefficientNames()[i]);
    nlohmann::json c = {{"value", values[i]}, {"status", FitStatusName(fit.timing.status[i])}};
    if (fit.timing.status[i] == sim::CoefficientFit::kFitted) {
      c["relativeSe"] = fit.timing.relative_se[i];
    } else {
      kept.push_back(
          absl::StrCat(name, " (", FitStatusName(fit.timing.status[i]), ", ", values[i], ")"));
    }
    coefficients[name] = std::move(c);
  }
  nlohmann::json loo = fit.timing.leave_one_out_rms ? nlohmann::json(*fit.timing.leave_one_out_rms)
                                                    : nlohmann::json(nullptr);
  absl::StrAppend(text,
                  fit.timing.leave_one_out_rms
                      ? absl::StrFormat("  leave-one-out error (rms): %.2f%%\n",
                                        100 * *fit.timing.leave_one_out_rms)
                      : std::string("  leave-one-out error: none (fewer than three points)\n"));
  absl::StrAppend(text, kept.empty()
                            ? std::string("  every coefficient fitted\n")
                            : absl::StrCat("  kept from the start (the runs cannot tell them): ",
                                           absl::StrJoin(kept, ", "), "\n"));
  absl::StrAppend(text, "  KV capacity: ", fit.kv_basis, "\n");
  return {{"campaign", runs.campaign},
          {"model", runs.model},
          {"start", start_name},
          {"points", std::move(points)},
          {"leaveOneOutRms", std::move(loo)},
          {"coefficients", std::move(coefficients)},
          {"kv", fit.kv_basis},
          {"npuBlockNum", runs.npu_block_num}};
}

int Fit(const FitFlags& f) {
  absl::StatusOr<nlohmann::json> report = LoadReport(f);
  if (!report.ok()) return Fail(report.status().message());
  absl::StatusOr<ReportRuns> runs = controller::RunsOfReport(*report, f.model);
  if (!runs.ok()) return Fail(runs.status().message());
  absl::StatusOr<sim::Profile> start = StartProfile(f.profile, runs->model);
  if (!start.ok()) return Fail(start.status().message());
  absl::StatusOr<sim::FitWorkload> w = controller::FitWorkloadOf(*start, f.workload);
  if (!w.ok()) return Fail(w.status().message());
  w->npu_block_num = runs->npu_block_num;
  absl::StatusOr<sim::ProfileFit> fit = sim::FitProfile(*start, *w, runs->points);
  if (!fit.ok()) {
    return Fail(absl::StrCat("profile fit (campaign ", runs->campaign, ", model ", runs->model,
                             "): ", fit.status().message()));
  }
  std::string text;
  nlohmann::json out = sim::ProfileJson(fit->profile);
  out["name"] = absl::StrCat(start->name, "-fit-", runs->campaign);
  out["description"] =
      absl::StrCat("mindie-sim profile ", start->name, " fitted to campaign ", runs->campaign,
                   " (model ", runs->model, ") by crest profile fit");
  out["fit"] = FitSection(*runs, *fit, start->name, &text);
  out["fit"]["workload"] = {{"maxOutputLen", f.workload.max_output},
                            {"requestCount", f.workload.request_count},
                            {"npuMemSize", f.workload.npu_mem},
                            {"worldSize", f.workload.world_size},
                            {"cacheBlockSize", f.workload.cache_block_size},
                            {"maxPrefillTokens", f.workload.max_prefill_tokens}};
  if (absl::Status s = WriteFileAtomically(f.out_file, out.dump(2) + "\n"); !s.ok()) {
    return Fail(absl::StrCat("-o ", f.out_file, ": ", s.message()));
  }
  std::cout << text << "  wrote " << f.out_file << "\n";
  return 0;
}

struct PredictFlags {
  std::string profile;
  WorkloadFlags workload;
  int lo = 0, hi = 0;
  int points = 48;
  std::string json_file;
};

int Predict(const PredictFlags& f) {
  absl::StatusOr<sim::Profile> profile = StartProfile(f.profile, "");
  if (!profile.ok()) return Fail(profile.status().message());
  absl::StatusOr<sim::FitWorkload> w = controller::FitWorkloadOf(*profile, f.workload);
  if (!w.ok()) return Fail(w.status().message());
  absl::StatusOr<sim::PredictedCurve> curve = sim::PredictCurve(*profile, *w, f.lo, f.hi, f.points);
  if (!curve.ok()) return Fail(absl::StrCat("profile predict: ", curve.status().message()));
  // The fit's leave-one-out error, when the profile was fitted: what a
  // point it did not see was off by.
  nlohmann::json uncertainty = nullptr;
  if (f.profile.find('/') != std::string::npos || f.profile.ends_with(".json")) {
    absl::StatusOr<std::string> text = ReadFileToString(f.profile);
    if (text.ok()) {
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object() && j.contains("fit") && j["fit"].contains("leaveOneOutRms")) {
        uncertainty = j["fit"]["leaveOneOutRms"];
      }
    }
  }
  std::printf("profile %s: MaxOutputLen %d, npuMemSize %g GiB, worldSize %d -> npuBlockNum %lld\n",
              profile->name.c_str(), f.workload.max_output, f.workload.npu_mem,
              f.workload.world_size, static_cast<long long>(curve->npu_block_num));
  std::printf("  %-12s %14s\n", "maxBatchSize", "GenerateSpeed");
  for (const auto& [b, speed] : curve->curve) {
    std::printf("  %-12d %14.2f%s\n", b, speed,
                b == curve->peak_max_batch_size ? "   <== predicted peak" : "");
  }
  std::printf("predicted peak: maxBatchSize %d at %.2f token/s (noise-free)%s\n",
              curve->peak_max_batch_size, curve->peak_generate_speed,
              uncertainty.is_number() ? absl::StrFormat("; the fit's leave-one-out error %.2f%%",
                                                        100 * uncertainty.get<double>())
                                            .c_str()
                                      : "; no fit error known (not a fitted profile)");
  if (!f.json_file.empty()) {
    nlohmann::json out = {{"profile", profile->name},
                          {"workload",
                           {{"maxOutputLen", f.workload.max_output},
                            {"npuMemSize", f.workload.npu_mem},
                            {"worldSize", f.workload.world_size},
                            {"npuBlockNum", curve->npu_block_num}}},
                          {"peak",
                           {{"maxBatchSize", curve->peak_max_batch_size},
                            {"GenerateSpeed", curve->peak_generate_speed}}},
                          {"uncertainty", uncertainty},
                          {"curve", nlohmann::json::array()}};
    for (const auto& [b, speed] : curve->curve) {
      out["curve"].push_back({{"maxBatchSize", b}, {"GenerateSpeed", speed}});
    }
    if (absl::Status s = WriteFileAtomically(f.json_file, out.dump(2) + "\n"); !s.ok()) {
      return Fail(absl::StrCat("--json ", f.json_file, ": ", s.message()));
    }
  }
  return 0;
}

}  // namespace

void AddProfileCommands(CLI::App& crest, Action* action) {
  CLI::App* group =
      crest.add_subcommand("profile", "Fit mindie-sim's model to a campaign and predict with it");
  group->require_subcommand(1);

  auto fit = std::make_shared<FitFlags>();
  CLI::App* fit_cmd = group->add_subcommand(
      "fit", "Fit a mindie-sim profile to one model's trusted runs in a campaign report");
  auto* report = fit_cmd->add_option(
      "--report", fit->report_file, "the campaign report (crest campaign report ID --format json)");
  auto* campaign = fit_cmd->add_option("--campaign", fit->campaign,
                                       "a campaign id: its report, from the "
                                       "controller (--controller)");
  report->excludes(campaign);
  fit_cmd->add_option("--model", fit->model, "the model (needed when the campaign has several)");
  fit_cmd->add_option("--profile", fit->profile,
                      "the starting profile, by name or file (default: by model name)");
  fit_cmd->add_option("-o,--out", fit->out_file, "the fitted profile (JSON)")->required();
  AddWorkloadFlags(fit_cmd, &fit->workload, false);
  AddEndpointFlags(*fit_cmd, &fit->endpoint, kQueryTimeout);
  // The controller only for --campaign.
  fit_cmd->get_option(std::string(fit->endpoint.peer.address_flag))->required(false);
  fit_cmd->callback([=] {
    *action = [=] {
      if (fit->report_file.empty() == fit->campaign.empty()) {
        return Fail("profile fit: give one of --report FILE or --campaign ID");
      }
      if (!fit->campaign.empty() && fit->endpoint.address.empty()) {
        return Fail(absl::StrCat("profile fit --campaign: ", fit->endpoint.peer.address_flag,
                                 " is required (the controller that ran the campaign)"));
      }
      return Fit(*fit);
    };
  });

  auto predict = std::make_shared<PredictFlags>();
  CLI::App* predict_cmd = group->add_subcommand(
      "predict", "The predicted throughput curve and peak of a profile for a workload");
  predict_cmd->add_option("--profile", predict->profile, "a profile, by name or file")->required();
  AddWorkloadFlags(predict_cmd, &predict->workload, true);
  predict_cmd
      ->add_option_function<std::vector<int>>(
          "--range",
          [predict](const std::vector<int>& r) {
            predict->lo = r[0];
            predict->hi = r[1];
          },
          "LO HI: the maxBatchSize range (default: 1 to three times the batch that fills the "
          "cache)")
      ->expected(2);
  predict_cmd->add_option("--points", predict->points, "grid points before refining (default 48)")
      ->check(CLI::Range(2, 1000));
  predict_cmd->add_option("--json", predict->json_file,
                          "also write {peak: {maxBatchSize, GenerateSpeed}, curve: [...]} here");
  predict_cmd->callback([=] { *action = [=] { return Predict(*predict); }; });
}

}  // namespace crest::cli
