#include "controller/campaign_io/report_curve.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "controller/campaign_io/request_shape.h"
#include "controller/campaign_io/trial_kind.h"

namespace crest::controller {
namespace {

struct PointRuns {
  double sum = 0;
  size_t runs = 0;
  std::optional<int64_t> preemptions;  // the most over its runs
  bool unpublished = false;            // a run without the counter
};

absl::StatusOr<const crest::v1::ModelReport*> FindModel(const crest::v1::CampaignReport& report,
                                                        const std::string& model) {
  std::vector<std::string> names;
  for (const auto& m : report.models()) {
    if (m.model() == model || (model.empty() && report.models_size() == 1)) return &m;
    names.push_back(m.model());
  }
  if (model.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("campaign ", report.id(), " has ", names.size(),
                                                   " models; name one with --model (",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  return absl::NotFoundError(absl::StrCat("campaign ", report.id(), " has no model \"", model,
                                          "\" (it has: ", absl::StrJoin(names, ", "), ")"));
}

}  // namespace

absl::StatusOr<crest::ThroughputCurve> CurveOfModel(const crest::v1::CampaignReport& report,
                                                    const crest::v1::Campaign* campaign,
                                                    const std::string& model) {
  absl::StatusOr<const crest::v1::ModelReport*> found = FindModel(report, model);
  if (!found.ok()) return found.status();
  const crest::v1::ModelReport& m = **found;
  // The trusted ok runs of the search (not calibration, not the rate search).
  std::map<int64_t, PointRuns> points;
  int64_t blocks = 0;
  for (const auto& t : m.trials()) {
    if (t.npu_block_num() > 0) blocks = t.npu_block_num();
    if (t.status() != crest::v1::TRIAL_OK || !IsSearchRun(t) || t.flags_size() > 0) {
      continue;
    }
    PointRuns& p = points[t.parameters().max_batch_size()];
    p.sum += t.result().generate_speed();
    ++p.runs;
    if (t.result().daemon().has_preemptions()) {
      p.preemptions = std::max<int64_t>(p.preemptions.value_or(0),
                                        static_cast<int64_t>(t.result().daemon().preemptions()));
    } else {
      p.unpublished = true;
    }
  }
  if (points.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("campaign ", report.id(), ", model ", m.model(),
                     ": no trusted search run measured ok yet, so there is no curve to write"));
  }
  crest::ThroughputCurve c;
  c.name = absl::StrCat(report.name().empty() ? report.id() : report.name(), "-", m.model());
  c.source = absl::StrCat("crest campaign report ", report.id(), " --format curve (model ",
                          m.model(), ", strategy ", m.strategy(), "): the mean GenerateSpeed of ",
                          "the trusted search runs at each maxBatchSize");
  if (blocks > 0) c.npu_block_num = blocks;
  if (campaign != nullptr) {
    const auto& spec = campaign->spec();
    const RequestShape shape = RequestShapeFor(spec.client());
    c.avg_input_tokens = shape.avg_input_tokens;
    c.avg_output_tokens = shape.avg_output_tokens;
    c.max_output_len = shape.max_output_tokens;
    if (spec.search().cache_block_size() > 0) c.cache_block_size = spec.search().cache_block_size();
    if (spec.search().step() > 0) c.step = spec.search().step();
  } else {
    c.avg_input_tokens = 186;  // GSM8K's (request_shape.h)
    c.avg_output_tokens = 346;
    c.max_output_len = 512;
  }
  // Outside the measured points a replay's daemon does not start: the range
  // is what was measured.
  c.range = std::make_pair(points.begin()->first, points.rbegin()->first);
  if (m.has_best() && m.best().has_noise()) c.noise_cv = std::min(0.5, m.best().noise());
  for (const auto& [point, p] : points) {
    crest::CurvePoint cp;
    cp.max_batch_size = point;
    cp.generate_speed = p.sum / static_cast<double>(p.runs);
    if (!p.unpublished) cp.preemptions = p.preemptions;
    c.points.push_back(cp);
  }
  return c;
}

}  // namespace crest::controller
