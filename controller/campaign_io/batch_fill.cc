#include "controller/campaign_io/batch_fill.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "common/mindie_limits.h"

namespace crest::controller {
namespace {

std::string ModelNames(const crest::v1::CampaignSpec& spec) {
  std::vector<std::string> names;
  for (const auto& m : spec.models()) names.push_back(m.name());
  return absl::StrCat(names.size() == 1 ? "model " : "models ", absl::StrJoin(names, ", "));
}

std::string RequestsSource(const crest::v1::ClientSpec& client) {
  return client.request_count() > 0 ? absl::StrCat("request_count ", client.request_count())
                                    : absl::StrCat("the GSM8K dataset's ", bench::kGsm8kRequests,
                                                   " requests (no request_count)");
}

bool ConcurrencyMode(const crest::v1::CampaignSpec& spec) {
  return spec.client().mode() != crest::v1::CLIENT_MODE_RATE;
}

}  // namespace

std::optional<int64_t> RequestsPerRun(const crest::v1::ClientSpec& client) {
  if (client.request_count() > 0) return client.request_count();
  const auto& d = client.dataset();
  bool gsm8k =
      d.type() == crest::v1::DATASET_TYPE_GSM8K || d.type() == crest::v1::DATASET_TYPE_UNSPECIFIED;
  if (gsm8k && (d.name().empty() || d.name() == "gsm8k")) return bench::kGsm8kRequests;
  return std::nullopt;
}

std::optional<int64_t> LargestFillablePoint(const crest::v1::CampaignSpec& spec) {
  if (!ConcurrencyMode(spec)) return std::nullopt;
  std::optional<int64_t> n = RequestsPerRun(spec.client());
  if (!n) return std::nullopt;
  return *n + 1;
}

std::vector<SpecProblem> CheckBatchCanFill(const crest::v1::CampaignSpec& spec) {
  std::vector<SpecProblem> problems;
  const auto& s = spec.search();
  std::optional<int64_t> top = LargestFillablePoint(spec);
  if (s.range_auto() || !top || s.range_hi() <= *top) return problems;
  problems.push_back(
      {"search.range", 0,
       absl::StrCat(ModelNames(spec), ": range [", s.range_lo(), ", ", s.range_hi(),
                    "] runs up to Concurrency ", s.range_hi() - 1, " (maxBatchSize - 1), but ",
                    RequestsSource(spec.client()), " sends ", *top - 1,
                    " requests per run, so the batch can never fill above maxBatchSize ", *top,
                    ": lower the range to at most ", *top, " or raise client.request_count to ",
                    "at least ", s.range_hi() - 1)});
  return problems;
}

std::vector<std::string> SpecWarnings(const crest::v1::CampaignSpec& spec) {
  std::vector<std::string> warnings;
  if (spec.calibrate() && spec.client().task_kind() == crest::v1::TASK_KIND_TEXT) {
    warnings.emplace_back(
        "calibrate: client.task_kind text measures no first-token or decode latency (one reply "
        "per request), so the select-batch calibration will be skipped; use task_kind stream "
        "to calibrate");
  }
  const auto& s = spec.search();
  std::optional<int64_t> top = LargestFillablePoint(spec);
  if (!top) return warnings;
  const int64_t requests = *top - 1;
  if (s.range_auto()) {
    // Said for a request_count the user chose; the cap holds for a dataset's size too.
    if (spec.client().request_count() > 0) {
      warnings.push_back(absl::StrCat(
          "search.range: the auto range of ", ModelNames(spec), " stops at maxBatchSize ", *top,
          " (", RequestsSource(spec.client()), " cannot fill a larger batch)"));
    }
    return warnings;
  }
  if (s.range_hi() > *top) return warnings;  // refused by CheckBatchCanFill
  const int64_t clients = std::max<int64_t>(1, s.range_hi() - 1);
  const double per_client = static_cast<double>(requests) / static_cast<double>(clients);
  if (per_client < bench::kFewRequestsPerClient) {
    warnings.push_back(absl::StrFormat(
        "client.request_count: %d requests per run for up to %d clients (%.2f per client at "
        "maxBatchSize %d, fewer than %.0f): the batch is full only for part of each run, so "
        "the top of the range is measured over a short steady state",
        requests, clients, per_client, s.range_hi(), bench::kFewRequestsPerClient));
  }
  return warnings;
}

}  // namespace crest::controller
