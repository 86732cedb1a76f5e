// One home for every MindIE and benchmark limit Crest checks or derives:
// mindie-sim refuses a config.json outside them as the daemon would, the agent
// refuses RPC arguments outside them (and publishes them, possibly narrowed by
// its config, in NodeInfo), the controller refuses a campaign whose derived
// values no eligible agent accepts, and crest-bench and the CLI check their
// flags against the same numbers. MindIE's ranges come from its documentation
// (mindie-facts.md); the benchmark ranges are Crest's own.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace crest {

// An inclusive range of whole numbers.
struct IntRange {
  int64_t min = 0;
  int64_t max = 0;

  constexpr bool Contains(int64_t v) const { return v >= min && v <= max; }
  // "[1, 819200]", as error messages quote it.
  std::string ToString() const { return absl::StrCat("[", min, ", ", max, "]"); }
};

namespace mindie {

// BackendConfig.ScheduleConfig.
inline constexpr IntRange kMaxBatchSize{1, 819200};
// Also at most maxBatchSize.
inline constexpr IntRange kMaxPrefillBatchSize{1, 819200};
// Also at least maxInputTokenLen.
inline constexpr IntRange kMaxPrefillTokens{1, 4194304};
// prefillTimeMsPerReq and decodeTimeMsPerReq: whole milliseconds.
inline constexpr IntRange kSelectBatchTimeMs{0, 1000};
// A power of two within the range.
inline constexpr IntRange kCacheBlockSize{1, 4096};
inline constexpr IntRange kMaxIterTimes{1, 4194304};

// BackendConfig.ModelDeployConfig.
inline constexpr IntRange kMaxSeqLen{1, 4194304};
inline constexpr IntRange kMaxInputTokenLen{1, 4194304};
inline constexpr IntRange kWorldSize{1, 64};
// BackendConfig.npuDeviceIds: logical card ids of one host.
inline constexpr IntRange kNpuDeviceId{0, 63};
// npuMemSize in GB; -1 (auto) is allowed besides.
inline constexpr IntRange kNpuMemSizeGb{1, 1024};

// ServerConfig: port, managementPort and metricsPort.
inline constexpr IntRange kPort{1024, 65535};
// mindie-sim's ports (its config.json and the agent's `sim:` section): a
// MindIE port, or 0 for one the OS assigns, which MindIE itself refuses.
constexpr bool IsSimPort(int64_t port) { return port == 0 || kPort.Contains(port); }
// "0 or [1024, 65535]", as errors about a sim port quote it.
inline std::string SimPortRange() { return absl::StrCat("0 or ", kPort.ToString()); }
inline constexpr IntRange kMaxLinkNum{1, 1000000};

}  // namespace mindie

// A BenchmarkSpec (crest-bench's flags, the agent's RunBenchmark). Keys of
// the limits an agent publishes in NodeInfo.benchmark_limits are the
// BenchmarkSpec field names.
namespace bench {

inline constexpr IntRange kConcurrency{1, 100000};
// 0 in a BenchmarkSpec means "the whole dataset"; explicit counts lie here.
inline constexpr IntRange kRequestCount{1, 10000000};
inline constexpr IntRange kWarmupRequests{0, 100000};
inline constexpr IntRange kMaxOutputLen{1, 1048576};
inline constexpr IntRange kSyntheticInputTokens{1, 131072};
// Requests per second in rate mode (0: concurrency mode).
inline constexpr double kMaxRequestRate = 1e6;
inline constexpr size_t kMaxModelNameBytes = 256;

// Questions in the GSM8K test split, the practice's dataset: a run without a
// request count sends each once.
inline constexpr int64_t kGsm8kRequests = 1319;
// Below this many measured requests per client a run is mostly ramp-up and
// drain: still measured, but the campaign says so (docs/campaign-spec.md).
inline constexpr double kFewRequestsPerClient = 2.0;

inline constexpr char kConcurrencyKey[] = "concurrency";
inline constexpr char kRequestCountKey[] = "request_count";
inline constexpr char kWarmupRequestsKey[] = "warmup_requests";
inline constexpr char kMaxOutputLenKey[] = "max_output_len";

}  // namespace bench

}  // namespace crest
