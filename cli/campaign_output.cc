#include "cli/campaign_output.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "controller/campaign_io/report.h"

namespace crest::cli {
namespace {

using controller::CampaignStateName;
using crest::v1::Campaign;

nlohmann::json BestJson(const crest::v1::ModelProgress& m) {
  if (!m.has_best()) return nullptr;
  const auto& p = m.best().parameters();
  return {{"maxBatchSize", p.max_batch_size()},
          {"maxPrefillBatchSize", p.max_prefill_batch_size()},
          {"supportSelectBatch", p.support_select_batch()},
          {"prefillTimeMsPerReq", p.prefill_time_ms_per_req()},
          {"decodeTimeMsPerReq", p.decode_time_ms_per_req()},
          {"GenerateSpeed", m.best().generate_speed()},
          {"GenerateSpeedPerClient", m.best().generate_speed_per_client()}};
}

std::string BestText(const crest::v1::ModelProgress& m) {
  return m.has_best()
             ? absl::StrFormat("best %d @ %.1f tok/s", m.best().parameters().max_batch_size(),
                               m.best().generate_speed())
             : "best -";
}

std::string PlannedText(const crest::v1::ModelProgress& m) {
  return m.trials_planned() > 0 ? absl::StrCat(m.trials_planned()) : "?";
}

std::string AgentState(const crest::v1::AgentInfo& a) {
  return a.state() == crest::v1::AGENT_READY ? "ready" : "lost";
}

}  // namespace

bool IsFinalState(crest::v1::CampaignState state) {
  return state == crest::v1::CAMPAIGN_SUCCEEDED || state == crest::v1::CAMPAIGN_FAILED ||
         state == crest::v1::CAMPAIGN_CANCELLED;
}

nlohmann::json CampaignJson(const Campaign& c) {
  nlohmann::json j = {{"id", c.id()},
                      {"name", c.spec().name()},
                      {"state", CampaignStateName(c.state())},
                      {"reason", c.reason()},
                      {"cancel_requested", c.cancel_requested()},
                      {"created", controller::FormatTimestamp(c.created())},
                      {"started", controller::FormatTimestamp(c.started())},
                      {"finished", controller::FormatTimestamp(c.finished())},
                      {"models", nlohmann::json::array()}};
  for (const auto& m : c.models()) {
    j["models"].push_back({{"model", m.model()},
                           {"trials_done", m.trials_done()},
                           {"trials_planned", m.trials_planned()},
                           {"trials_failed", m.trials_failed()},
                           {"best", BestJson(m)},
                           {"current_point", m.current_point()},
                           {"range", {m.range_lo(), m.range_hi()}},
                           {"npuBlockNum", m.npu_block_num()},
                           {"done", m.done()},
                           {"activity", m.activity()}});
  }
  return j;
}

std::string ModelLine(const crest::v1::ModelProgress& m) {
  std::string range =
      m.range_hi() > 0 ? absl::StrFormat("range [%d, %d]", m.range_lo(), m.range_hi()) : "range ?";
  return absl::StrFormat("%-16s trials %u/%s  %s  %s  %s", m.model(), m.trials_done(),
                         PlannedText(m), BestText(m), range, m.activity());
}

std::string ProgressBar(const crest::v1::ModelProgress& m, int width) {
  double frac = m.done() ? 1.0
                : m.trials_planned() > 0
                    ? std::min(1.0, static_cast<double>(m.trials_done()) / m.trials_planned())
                    : 0.0;
  int filled = static_cast<int>(std::lround(frac * width));
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '-'), "]");
}

std::string FitLine(const std::string& line, int columns) {
  if (static_cast<int>(line.size()) < columns) return line;
  return line.substr(0, std::max(0, columns - 1));
}

std::string CampaignText(const Campaign& c) {
  std::string out = absl::StrCat(
      "campaign ", c.id(), " (", c.spec().name(), "): ", CampaignStateName(c.state()),
      c.cancel_requested() && c.state() == crest::v1::CAMPAIGN_RUNNING ? " (cancelling)" : "",
      c.reason().empty() ? "" : absl::StrCat(" - ", c.reason()), "\n");
  for (const auto& m : c.models()) absl::StrAppend(&out, "  ", ModelLine(m), "\n");
  return out;
}

std::string SubmitJson(const Campaign& created) {
  nlohmann::json j = {{"id", created.id()}};
  if (created.warnings_size() > 0) {
    j["warnings"] = std::vector<std::string>(created.warnings().begin(), created.warnings().end());
  }
  return j.dump() + "\n";
}

std::string ListText(const crest::v1::ListCampaignsReply& reply) {
  std::string out = absl::StrFormat("%-8s %-24s %-10s %s\n", "ID", "NAME", "STATE", "CREATED");
  for (const auto& c : reply.campaigns()) {
    absl::StrAppendFormat(&out, "%-8s %-24s %-10s %s\n", c.id(), c.spec().name(),
                          CampaignStateName(c.state()), controller::FormatTimestamp(c.created()));
  }
  return out;
}

nlohmann::json ListJson(const crest::v1::ListCampaignsReply& reply) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : reply.campaigns()) j.push_back(CampaignJson(c));
  return j;
}

std::string CancelText(const Campaign& c) {
  if (IsFinalState(c.state())) {
    return absl::StrCat("campaign ", c.id(), " already ended: ", CampaignStateName(c.state()),
                        "\n");
  }
  return absl::StrCat("campaign ", c.id(),
                      ": cancelling (running trials stop, hosts are restored; see crest campaign "
                      "watch)\n");
}

std::string AgentsText(const crest::v1::ListAgentsReply& reply) {
  std::string out;
  for (const auto& a : reply.agents()) {
    absl::StrAppendFormat(&out, "%-16s %-22s %-6s %s\n", a.node_name(), a.address(), AgentState(a),
                          a.running_trial());
  }
  return out;
}

nlohmann::json AgentsJson(const crest::v1::ListAgentsReply& reply) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& a : reply.agents()) {
    j.push_back(
        {{"node", a.node_name()},
         {"address", a.address()},
         {"state", AgentState(a)},
         {"static", a.static_()},
         {"labels", std::map<std::string, std::string>(a.labels().begin(), a.labels().end())},
         {"running_trial", a.running_trial()}});
  }
  return j;
}

std::map<std::string, int64_t> PracticeAnswers(const crest::v1::CampaignReport& practice) {
  std::map<std::string, int64_t> answers;
  for (const auto& m : practice.models()) {
    if (m.has_best() && m.best().parameters().max_batch_size() > 0) {
      answers[m.model()] = m.best().parameters().max_batch_size();
    }
  }
  return answers;
}

std::string RenderReport(const std::string& format, const controller::HtmlReportInput& input) {
  if (format == "html") return controller::ReportToHtml(input);
  if (format == "json") return controller::ReportToJson(input.report).dump(2) + "\n";
  if (format == "csv") return controller::ReportToCsv(input.report);
  return controller::ReportToTable(input.report);
}

std::string WatchView::Update(const Campaign& c, int columns) {
  return terminal_ ? Frame(c, columns) : Lines(c);
}

std::string WatchView::End(const Campaign& c) const {
  if (terminal_ && !c.reason().empty()) return absl::StrCat("  ", c.reason(), "\n");
  return "";
}

std::string WatchView::Frame(const Campaign& c, int columns) {
  std::string frame;
  if (drawn_ > 0) absl::StrAppend(&frame, "\x1b[", drawn_, "A");
  absl::StrAppend(&frame, "\x1b[2K",
                  FitLine(absl::StrCat("campaign ", c.id(), " (", c.spec().name(),
                                       "): ", CampaignStateName(c.state())),
                          columns),
                  "\n");
  for (const auto& m : c.models()) {
    std::string now = m.done()                ? "done"
                      : m.current_point() > 0 ? absl::StrCat("now ", m.current_point())
                                              : "";
    absl::StrAppend(&frame, "\x1b[2K",
                    FitLine(absl::StrFormat("  %-14s %s %u/%s  %-26s %-10s %s", m.model(),
                                            ProgressBar(m, 20), m.trials_done(), PlannedText(m),
                                            BestText(m), now, m.activity().substr(0, 60)),
                            columns),
                    "\n");
  }
  drawn_ = 1 + c.models_size();
  return frame;
}

std::string WatchView::Lines(const Campaign& c) {
  std::string out;
  std::string state = CampaignStateName(c.state());
  if (state != last_state_) {
    absl::StrAppend(&out, "campaign ", c.id(), ": ", state,
                    c.reason().empty() ? "" : " - " + c.reason(), "\n");
    last_state_ = state;
  }
  for (const auto& m : c.models()) {
    // A line without its request counts ("... (12/40 requests)") is the key.
    std::string line = ModelLine(m);
    std::string key = line.substr(0, line.rfind(" requests)"));
    key = key.substr(0, key.rfind(" ("));
    if (last_[m.model()] != key) {
      absl::StrAppend(&out, "  ", line, "\n");
      last_[m.model()] = key;
    }
  }
  return out;
}

}  // namespace crest::cli
