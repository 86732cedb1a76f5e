// The campaign report as one self-contained HTML page (no external CSS, JS,
// fonts or images): per model the throughput curve as inline SVG (points,
// peak, infeasible/preempting region, error bars over repeats, the
// practice's answer beside Crest's), the trial table, the chosen
// ScheduleConfig as JSON to paste, the host settings and the timeline.
// Responsive and printable: the page never scrolls sideways; wide tables
// scroll inside their own box. Rendered by `crest campaign report --format html`.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "crest/v1/controller.pb.h"

namespace crest::controller {

struct HtmlReportInput {
  crest::v1::CampaignReport report;
  // The campaign as GetCampaign returns it (spec, host settings, times);
  // without it the host section and the campaign's own times are "not known".
  const crest::v1::Campaign* campaign = nullptr;
  // The tuning practice's answer (maxBatchSize) per model, drawn beside
  // Crest's peak when known.
  std::map<std::string, int64_t> practice_max_batch_size;
};

std::string ReportToHtml(const HtmlReportInput& input);

}  // namespace crest::controller
