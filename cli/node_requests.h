// What `crest node` sends an agent, built from its flags: the `--set` and
// `--pin` values, the StartDaemon, StopDaemon and RunBenchmark requests, and
// the deadline each of those calls gets. Plain functions, no network.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "crest/v1/agent.pb.h"

namespace crest::cli {

// `crest node start`'s own flags.
struct StartFlags {
  std::vector<std::string> sets;  // --set KEY=VALUE, repeatable
  std::string pin = "none";
  bool replace = false;
  double start_timeout_s = 0;  // 0: the agent's
  bool stream_log = false;
};

// `crest node bench`'s own flags (MindIE `benchmark` names and kebab-case).
struct BenchFlags {
  uint32_t concurrency = 128;
  double request_rate = 0;
  uint32_t request_count = 0;
  uint32_t max_output_len = 20;
  std::string dataset_type = "gsm8k";
  std::string dataset_name;
  uint32_t synthetic_input_len = 0;
  std::string task_kind = "stream";
  std::string api = "mindie";
  std::string model_name;
  std::string distribution = "poisson";
  uint32_t warmup = 0;
  double request_timeout_s = 600;
  double duration_s = 0;
  uint64_t seed = 0;
};

void AddStartFlags(CLI::App& cmd, StartFlags* flags);
void AddBenchFlags(CLI::App& cmd, BenchFlags* flags);

// --set KEY=VALUE: the value typed as true/false, an integer, else a finite
// number. Which keys the agent accepts is the agent's to say.
absl::StatusOr<crest::v1::ConfigOverride> ParseSet(absl::string_view text);

// --pin: none, odd-numa, or a CPU list (starting with a digit, e.g. 24-47).
absl::StatusOr<crest::v1::PinningPolicy> ParsePin(absl::string_view pin);

// The StartDaemon request for `slot`; the first bad flag is the error.
absl::StatusOr<crest::v1::StartDaemonRequest> MakeStartRequest(uint32_t slot,
                                                               const StartFlags& flags);
// The start call's default deadline: the start-up deadline asked for plus a
// margin, else kDaemonStartTimeout.
absl::Duration StartCallTimeout(const StartFlags& flags);

// The StopDaemon request for `slot` with --grace (seconds >= 0; 0: the agent's).
absl::StatusOr<crest::v1::StopDaemonRequest> MakeStopRequest(uint32_t slot, double grace_s);
// The stop call's default deadline: the grace plus a margin.
absl::Duration StopCallTimeout(double grace_s);

// The benchmark spec the bench flags describe; the first bad flag is the error.
absl::StatusOr<crest::v1::BenchmarkSpec> MakeBenchmarkSpec(const BenchFlags& flags);

}  // namespace crest::cli
