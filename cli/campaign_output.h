// What `crest campaign` prints of the controller's replies: the JSON of
// --output json, the human text, the live view of `watch`, and the report in
// each --format. Plain functions (and one small state machine for watch).
#pragma once

#include <map>
#include <string>

#include "nlohmann/json.hpp"

#include "controller/campaign_io/report_html.h"
#include "crest/v1/controller.pb.h"

namespace crest::cli {

bool IsFinalState(crest::v1::CampaignState state);

nlohmann::json CampaignJson(const crest::v1::Campaign& campaign);
// "campaign c1 (name): running", then one line per model.
std::string CampaignText(const crest::v1::Campaign& campaign);
// One model's progress: trials, best point, range, activity.
std::string ModelLine(const crest::v1::ModelProgress& model);
// A progress bar of `width` cells, "[####----]".
std::string ProgressBar(const crest::v1::ModelProgress& model, int width);
// `line` cut to fewer than `columns` characters, so a terminal never wraps it.
std::string FitLine(const std::string& line, int columns);

// `submit`: the id alone on stdout in text (warnings go to stderr), or
// {"id", "warnings"} in JSON.
std::string SubmitJson(const crest::v1::Campaign& created);
std::string ListText(const crest::v1::ListCampaignsReply& reply);
nlohmann::json ListJson(const crest::v1::ListCampaignsReply& reply);
std::string CancelText(const crest::v1::Campaign& campaign);
std::string AgentsText(const crest::v1::ListAgentsReply& reply);
nlohmann::json AgentsJson(const crest::v1::ListAgentsReply& reply);

// The practice's answer (maxBatchSize) per model of a campaign that ran its
// ladder, for the HTML report.
std::map<std::string, int64_t> PracticeAnswers(const crest::v1::CampaignReport& practice);
// The report in `format` ("table", "json", "csv" or "html"; html reads
// `input.campaign` and the practice's answers, the others `input.report` only).
std::string RenderReport(const std::string& format, const controller::HtmlReportInput& input);

// What `crest campaign watch` prints of each snapshot: on a terminal a frame
// redrawn in place (progress bars, cut to the terminal's width); elsewhere
// plain lines, one per change of state and one per real change of a model
// (changed request counts alone make no new line).
class WatchView {
 public:
  explicit WatchView(bool terminal) : terminal_(terminal) {}
  bool terminal() const { return terminal_; }
  // The text for this snapshot; `columns` is the terminal's width.
  std::string Update(const crest::v1::Campaign& campaign, int columns);
  // After the final snapshot: the reason on a terminal (plain lines said it).
  std::string End(const crest::v1::Campaign& campaign) const;

 private:
  std::string Frame(const crest::v1::Campaign& campaign, int columns);
  std::string Lines(const crest::v1::Campaign& campaign);

  bool terminal_;
  int drawn_ = 0;                            // lines of the last frame
  std::string last_state_;                   // plain lines: the state said last
  std::map<std::string, std::string> last_;  // plain lines: model -> its line said last
};

}  // namespace crest::cli
