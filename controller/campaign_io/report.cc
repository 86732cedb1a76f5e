#include "controller/campaign_io/report.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

#include "controller/campaign_io/trial_kind.h"

namespace crest::controller {
namespace {

double Round(double v, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

nlohmann::json CalibrationJson(const crest::v1::CalibrationReport& c) {
  nlohmann::json j = {{"outcome", c.outcome()},
                      {"kept", c.outcome() == "kept"},
                      {"maxBatchSize", c.max_batch_size()},
                      {"GenerateSpeedBefore", c.generate_speed_before()},
                      {"runsBefore", c.runs_before()},
                      {"reason", c.reason()}};
  if (c.outcome() == "skipped") return j;
  j["prefillTimeMsPerReq"] = c.prefill_time_ms_per_req();
  j["decodeTimeMsPerReq"] = c.decode_time_ms_per_req();
  const bool measured = c.outcome() == "kept" || c.runs_after() > 0;
  j["GenerateSpeedAfter"] = measured ? nlohmann::json(c.generate_speed_after()) : nullptr;
  j["runsAfter"] = c.runs_after();
  j["change"] = measured ? nlohmann::json(c.change()) : nullptr;
  j["band"] = c.band();
  return j;
}

// The notes beside a figure whose runs the trust checks flagged, the same
// words in the maxBatchSize table and in the rate curve: every run flagged,
// or `n` flagged runs left out of a trusted figure.
std::string AllFlaggedNote(const std::string& flags) {
  return absl::StrCat("flagged (", flags, "): not evidence");
}
std::string FlaggedNotCountedNote(uint32_t n, const std::string& flags) {
  return absl::StrCat("(", n, " flagged run", n > 1 ? "s" : "", " not counted: ", flags, ")");
}

nlohmann::json RateSearchJson(const crest::v1::RateSearchReport& r) {
  nlohmann::json j = {{"maxBatchSize", r.max_batch_size()},
                      {"concurrency", r.concurrency()},
                      {"done", r.done()},
                      {"reason", r.reason()},
                      {"band", r.band()}};
  j["bestRate"] = r.best_rate() > 0 ? nlohmann::json(r.best_rate()) : nullptr;
  j["bestGenerateSpeed"] = r.best_rate() > 0 ? nlohmann::json(r.best_generate_speed()) : nullptr;
  j["curve"] = nlohmann::json::array();
  for (const auto& p : r.points()) {
    nlohmann::json jp = {{"requestRate", p.request_rate()},
                         {"GenerateSpeed", p.generate_speed()},
                         {"QPS", p.qps()},
                         {"status", p.status()},
                         {"rises", p.rises()},
                         {"trial", p.trial()}};
    if (p.daemon_pid() != 0) jp["daemonPid"] = p.daemon_pid();
    if (p.flagged_runs() > 0) {
      jp["flaggedRuns"] = p.flagged_runs();
      jp["flags"] = std::vector<std::string>(p.flags().begin(), p.flags().end());
    }
    j["curve"].push_back(std::move(jp));
  }
  return j;
}

// The calibration's verdict and the rate curve under a model's table.
std::string AfterSearchText(const crest::v1::ModelReport& m) {
  std::string out;
  if (m.has_calibration()) {
    const auto& c = m.calibration();
    if (c.outcome() == "skipped" || c.outcome() == "pending") {
      absl::StrAppend(&out, "  calibration: ", c.outcome(), ": ", c.reason(), "\n");
    } else {
      absl::StrAppend(
          &out,
          absl::StrFormat("  calibration at %d: supportSelectBatch prefillTimeMsPerReq=%.0f "
                          "decodeTimeMsPerReq=%.0f: GenerateSpeed %.1f -> %s token/s: %s",
                          c.max_batch_size(), c.prefill_time_ms_per_req(),
                          c.decode_time_ms_per_req(), c.generate_speed_before(),
                          c.runs_after() > 0 ? absl::StrFormat("%.1f", c.generate_speed_after())
                                             : std::string("-"),
                          c.outcome()),
          " (", c.reason(), ")\n");
    }
  }
  if (m.has_rate_search()) {
    const auto& r = m.rate_search();
    absl::StrAppend(&out,
                    absl::StrFormat("  rate search at maxBatchSize %d, Concurrency %d:\n",
                                    r.max_batch_size(), r.concurrency()),
                    absl::StrFormat("    %-14s %-14s %s\n", "requests/s", "GenerateSpeed", ""));
    for (const auto& p : r.points()) {
      std::string note;
      if (p.status() == "flagged") {
        note = AllFlaggedNote(absl::StrJoin(p.flags(), ", "));
      } else if (p.status() != "ok") {
        note = p.status();
      } else if (p.rises()) {
        note = "rises";
      }
      if (p.status() != "flagged" && p.flagged_runs() > 0) {
        absl::StrAppend(&note, note.empty() ? "" : " ",
                        FlaggedNotCountedNote(p.flagged_runs(), absl::StrJoin(p.flags(), ", ")));
      }
      absl::StrAppend(
          &out, absl::StrFormat("    %-14.3f %-14s %s%s\n", p.request_rate(),
                                p.status() == "ok" || p.status() == "flagged"
                                    ? absl::StrFormat("%.1f", p.generate_speed())
                                    : std::string("-"),
                                note, p.request_rate() == r.best_rate() ? "   <== best rate" : ""));
    }
    absl::StrAppend(&out, "    ", r.done() ? "" : "(running) ", r.reason(), "\n");
  }
  return out;
}

}  // namespace

std::string TrialStatusName(crest::v1::TrialStatus status) {
  if (status == crest::v1::TRIAL_STATUS_UNSPECIFIED) return "unspecified";
  return absl::AsciiStrToLower(absl::StripPrefix(crest::v1::TrialStatus_Name(status), "TRIAL_"));
}

std::string CampaignStateName(crest::v1::CampaignState state) {
  if (state == crest::v1::CAMPAIGN_STATE_UNSPECIFIED) return "unspecified";
  return absl::AsciiStrToLower(
      absl::StripPrefix(crest::v1::CampaignState_Name(state), "CAMPAIGN_"));
}

std::string FormatTimestamp(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "";
  absl::Time time = absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

nlohmann::json ReportToJson(const crest::v1::CampaignReport& report) {
  nlohmann::json j;
  j["id"] = report.id();
  j["name"] = report.name();
  j["state"] = CampaignStateName(report.state());
  if (report.warnings_size() > 0) {
    j["warnings"] = std::vector<std::string>(report.warnings().begin(), report.warnings().end());
  }
  j["models"] = nlohmann::json::array();
  for (const auto& m : report.models()) {
    nlohmann::json jm;
    jm["model"] = m.model();
    if (m.has_best()) {
      const auto& p = m.best().parameters();
      jm["best"] = {{"maxBatchSize", p.max_batch_size()},
                    {"maxPrefillBatchSize", p.max_prefill_batch_size()},
                    {"supportSelectBatch", p.support_select_batch()},
                    {"prefillTimeMsPerReq", p.prefill_time_ms_per_req()},
                    {"decodeTimeMsPerReq", p.decode_time_ms_per_req()},
                    {"GenerateSpeed", m.best().generate_speed()},
                    {"GenerateSpeedPerClient", m.best().generate_speed_per_client()},
                    {"runs", m.best().runs()},
                    {"untrusted", m.best().untrusted()}};
      // Relative noise of one run and how sure the choice is; null when no
      // point was measured twice / nothing else was measured.
      jm["best"]["noise"] = m.best().has_noise() ? nlohmann::json(m.best().noise()) : nullptr;
      jm["best"]["confidence"] =
          m.best().has_confidence() ? nlohmann::json(m.best().confidence()) : nullptr;
      // What the answer rests on (knee-fit, knee, measured, practice-ladder),
      // and why; null where the strategy says nothing (grid).
      jm["best"]["basis"] =
          m.best().basis().empty() ? nlohmann::json(nullptr) : nlohmann::json(m.best().basis());
      jm["best"]["basisReason"] = m.best().basis_reason().empty()
                                      ? nlohmann::json(nullptr)
                                      : nlohmann::json(m.best().basis_reason());
    } else {
      jm["best"] = nullptr;
    }
    jm["trials"] = nlohmann::json::array();
    for (const auto& t : m.trials()) {
      const auto& p = t.parameters();
      const auto& r = t.result();
      jm["trials"].push_back({{"id", t.id()},
                              {"node", t.node()},
                              {"slot", t.slot()},
                              {"neighbours", t.neighbours()},
                              {"maxBatchSize", p.max_batch_size()},
                              {"maxPrefillBatchSize", p.max_prefill_batch_size()},
                              {"supportSelectBatch", p.support_select_batch()},
                              {"prefillTimeMsPerReq", p.prefill_time_ms_per_req()},
                              {"decodeTimeMsPerReq", p.decode_time_ms_per_req()},
                              {"concurrency", p.concurrency()},
                              {"status", TrialStatusName(t.status())},
                              {"calibration", t.calibration()},
                              {"confirmation", t.confirmation()},
                              {"attempt", t.attempt()},
                              {"repeat", t.repeat()},
                              {"GenerateSpeed", r.generate_speed()},
                              {"GenerateSpeedPerClient", r.generate_speed_per_client()},
                              {"FirstTokenTime", r.first_token_time().average_ms()},
                              {"DecodeTime", r.decode_time().average_ms()},
                              {"succeeded", r.succeeded()},
                              {"failed", r.failed()},
                              {"npuBlockNum", t.npu_block_num()},
                              {"started", FormatTimestamp(t.started())},
                              {"finished", FormatTimestamp(t.finished())},
                              {"reason", t.reason()}});
      if (t.flags_size() > 0) {
        jm["trials"].back()["flags"] = std::vector<std::string>(t.flags().begin(), t.flags().end());
      }
      if (r.daemon().has_preemptions())
        jm["trials"].back()["preemptions"] = r.daemon().preemptions();
      jm["trials"].back()["rateSearch"] = t.rate_search();
      if (t.rate_search()) jm["trials"].back()["requestRate"] = p.request_rate();
      if (r.daemon_pid() != 0) jm["trials"].back()["daemonPid"] = r.daemon_pid();
      jm["trials"].back()["QPS"] = r.qps();
    }
    jm["rounds"] = m.rounds();
    jm["strategy"] = m.strategy();
    if (m.node_speeds_size() > 0) {
      jm["nodeSpeeds"] = nlohmann::json::array();
      for (const auto& n : m.node_speeds()) {
        jm["nodeSpeeds"].push_back(
            {{"node", n.node()}, {"factor", n.factor()}, {"sharedRuns", n.shared_runs()}});
      }
    }
    if (m.predicted_size() > 0) {
      jm["predicted"] = nlohmann::json::array();
      for (const auto& p : m.predicted()) {
        jm["predicted"].push_back(
            {{"maxBatchSize", p.max_batch_size()}, {"GenerateSpeed", p.generate_speed()}});
      }
      jm["predictedSource"] = m.predicted_source();
    }
    if (m.fleet_size() > 0) {
      jm["fleet"] = nlohmann::json::array();
      for (const auto& f : m.fleet()) {
        jm["fleet"].push_back({{"node", f.node()},
                               {"GenerateSpeed", f.generate_speed()},
                               {"runs", f.runs()},
                               {"ratio", f.ratio()},
                               {"searched", f.searched()},
                               {"reason", f.reason()}});
      }
    }
    if (m.has_calibration()) jm["calibration"] = CalibrationJson(m.calibration());
    if (m.has_rate_search()) jm["rate_search"] = RateSearchJson(m.rate_search());
    j["models"].push_back(std::move(jm));
  }
  return j;
}

namespace {

// The best's search line (strategy, rounds, noise, confidence), what it
// rests on, and the node speeds divided out, when any is not 1.
std::string SearchSummaryText(const crest::v1::ModelReport& m) {
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("  search: %s, %d rounds", m.strategy(), m.rounds()));
  if (m.best().has_noise()) {
    absl::StrAppend(&out, absl::StrFormat("; noise of one run %.2f%% (%d runs at the best)",
                                          100 * m.best().noise(), m.best().runs()));
  }
  if (m.best().has_confidence()) {
    absl::StrAppend(&out, absl::StrFormat("; confidence %.0f%%", 100 * m.best().confidence()));
  }
  absl::StrAppend(&out, "\n");
  if (!m.best().basis().empty()) {
    absl::StrAppend(
        &out, "  basis: ", m.best().basis(),
        m.best().basis_reason().empty() ? "" : absl::StrCat(": ", m.best().basis_reason()), "\n");
  }
  // Only when a node's figures were corrected: alike nodes say nothing.
  bool corrected = false;
  for (const auto& n : m.node_speeds()) corrected |= n.factor() != 1;
  if (corrected) {
    std::vector<std::string> speeds;
    for (const auto& n : m.node_speeds()) {
      speeds.push_back(
          absl::StrFormat("%s x%.3f (%d shared runs)", n.node(), n.factor(), n.shared_runs()));
    }
    absl::StrAppend(&out, "  node speeds, divided out before points were compared: ",
                    absl::StrJoin(speeds, ", "), "\n");
  }
  if (m.fleet_size() > 0) {
    absl::StrAppend(&out, "  fleet, at the final configuration:\n");
    for (const auto& f : m.fleet()) {
      absl::StrAppend(
          &out, f.runs() > 0 ? absl::StrFormat("    %-20s %10.2f token/s  x%.3f  %s\n", f.node(),
                                               f.generate_speed(), f.ratio(),
                                               f.searched() ? "(searched)" : "(confirmed)")
                             : absl::StrFormat("    %-20s no figure: %s\n", f.node(), f.reason()));
    }
  }
  return out;
}

}  // namespace

std::string ReportToTable(const crest::v1::CampaignReport& report) {
  std::string out = absl::StrCat("campaign ", report.id(),
                                 report.name().empty() ? "" : " (" + report.name() + ")", ": ",
                                 CampaignStateName(report.state()), "\n");
  for (const std::string& w : report.warnings()) absl::StrAppend(&out, "warning: ", w, "\n");
  for (const auto& m : report.models()) {
    absl::StrAppend(&out, "\nmodel ", m.model(), "\n");
    // One row per point: the mean of its ok repeats, or the status that ended
    // it. As in the search, a flagged run counts only where every run of the
    // point was flagged, and the row says so: a figure that beats the peak's
    // must not look like evidence when the trust checks discarded it.
    struct Figures {
      int n = 0;
      double speed = 0;
      double per_client = 0;
      std::string nodes;
      void Add(const crest::v1::Trial& t) {
        ++n;
        speed += t.result().generate_speed();
        per_client += t.result().generate_speed_per_client();
        if (nodes.find(t.node()) == std::string::npos) {
          absl::StrAppend(&nodes, nodes.empty() ? "" : ",", t.node());
        }
      }
    };
    struct Row {
      Figures trusted;
      Figures flagged;
      std::set<std::string> flags;
      std::string status;
    };
    std::map<int64_t, Row> rows;
    for (const auto& t : m.trials()) {
      // Calibrated, rate-search and confirmation runs have their own lines
      // below the table.
      if (!IsSearchRun(t)) continue;
      Row& row = rows[t.parameters().max_batch_size()];
      if (t.status() == crest::v1::TRIAL_OK) {
        if (t.flags_size() > 0) {
          row.flagged.Add(t);
          row.flags.insert(t.flags().begin(), t.flags().end());
        } else {
          row.trusted.Add(t);
        }
      } else if (row.trusted.n + row.flagged.n == 0 && t.status() != crest::v1::TRIAL_INTERRUPTED) {
        row.status = TrialStatusName(t.status());
      }
    }
    if (rows.empty()) {
      absl::StrAppend(&out, "  no trials\n");
      continue;
    }
    absl::StrAppend(
        &out, absl::StrFormat("  %-14s %-17s %-24s %-14s %s\n", "maxBatchSize", "maxPrefillBatch",
                              "GenerateSpeedPerClient", "GenerateSpeed", "node"));
    int64_t peak = m.has_best() ? m.best().parameters().max_batch_size() : -1;
    for (const auto& [point, row] : rows) {
      const Figures& shown = row.trusted.n > 0 ? row.trusted : row.flagged;
      if (shown.n > 0) {
        std::string note;
        if (row.trusted.n == 0) {
          note = "   " + AllFlaggedNote(absl::StrJoin(row.flags, ", "));
        } else if (row.flagged.n > 0) {
          note = "   " + FlaggedNotCountedNote(static_cast<uint32_t>(row.flagged.n),
                                               absl::StrJoin(row.flags, ", "));
        }
        absl::StrAppend(&out,
                        absl::StrFormat("  %-14d %-17d %-24.4f %-14.1f %s%s%s\n", point,
                                        std::max<int64_t>(1, point / 2), shown.per_client / shown.n,
                                        shown.speed / shown.n, shown.nodes,
                                        point == peak ? "   <== peak" : "", note));
      } else {
        absl::StrAppend(&out, absl::StrFormat("  %-14d %-17d %-24s %-14s\n", point,
                                              std::max<int64_t>(1, point / 2),
                                              row.status.empty() ? "-" : row.status, "-"));
      }
    }
    if (m.has_best()) {
      const auto& p = m.best().parameters();
      absl::StrAppend(&out, absl::StrFormat("  best: maxBatchSize=%d maxPrefillBatchSize=%d "
                                            "supportSelectBatch=%s",
                                            p.max_batch_size(), p.max_prefill_batch_size(),
                                            p.support_select_batch() ? "true" : "false"));
      if (p.support_select_batch()) {
        absl::StrAppend(&out,
                        absl::StrFormat(" prefillTimeMsPerReq=%.0f decodeTimeMsPerReq=%.0f",
                                        p.prefill_time_ms_per_req(), p.decode_time_ms_per_req()));
      }
      absl::StrAppend(
          &out, absl::StrFormat(" -> GenerateSpeed %.1f token/s%s\n", m.best().generate_speed(),
                                m.best().untrusted()
                                    ? "  UNTRUSTED: every run was flagged, not a recommendation"
                                    : ""));
      absl::StrAppend(&out, SearchSummaryText(m));
    }
    absl::StrAppend(&out, AfterSearchText(m));
  }
  return out;
}

std::string ReportToCsv(const crest::v1::CampaignReport& report) {
  std::string out =
      "campaign,model,trial,node,status,calibration,attempt,repeat,maxBatchSize,"
      "maxPrefillBatchSize,supportSelectBatch,prefillTimeMsPerReq,decodeTimeMsPerReq,"
      "concurrency,npuBlockNum,GenerateSpeed,GenerateSpeedPerClient,FirstTokenTime,DecodeTime,"
      "succeeded,failed,started,finished,reason,slot\n";
  for (const auto& m : report.models()) {
    for (const auto& t : m.trials()) {
      const auto& p = t.parameters();
      const auto& r = t.result();
      absl::StrAppend(
          &out,
          absl::StrFormat(
              "%s,%s,%s,%s,%s,%s,%d,%d,%d,%d,%s,%g,%g,%d,%d,%g,%g,%g,%g,%d,%d,%s,%s,%s,%d\n",
              CsvField(report.id()), CsvField(m.model()), CsvField(t.id()), CsvField(t.node()),
              TrialStatusName(t.status()), t.calibration() ? "true" : "false", t.attempt(),
              t.repeat(), p.max_batch_size(), p.max_prefill_batch_size(),
              p.support_select_batch() ? "true" : "false", p.prefill_time_ms_per_req(),
              p.decode_time_ms_per_req(), p.concurrency(), t.npu_block_num(),
              Round(r.generate_speed(), 4), Round(r.generate_speed_per_client(), 6),
              Round(r.first_token_time().average_ms(), 3), Round(r.decode_time().average_ms(), 3),
              r.succeeded(), r.failed(), FormatTimestamp(t.started()),
              FormatTimestamp(t.finished()), CsvField(t.reason()), t.slot()));
    }
  }
  return out;
}

}  // namespace crest::controller
