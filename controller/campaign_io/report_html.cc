#include "controller/campaign_io/report_html.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

#include "controller/campaign_io/report.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;

std::string Esc(const std::string& s) {
  return absl::StrReplaceAll(
      s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&#39;"}});
}

double Seconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + t.nanos() / 1e9;
}

bool Set(const google::protobuf::Timestamp& t) { return t.seconds() != 0 || t.nanos() != 0; }

// Round tick steps (1, 2, 5 x 10^n) so that about `count` ticks cover [lo, hi].
std::vector<double> Ticks(double lo, double hi, int count) {
  std::vector<double> ticks;
  if (!(hi > lo)) return ticks;
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push_back(v);
  }
  return ticks;
}

constexpr const char* kStyle = R"(
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0 auto;max-width:60rem;padding:1rem;font:15px/1.45 system-ui,-apple-system,"Segoe UI",
Roboto,"Noto Sans",sans-serif;color:#1b1f24;background:#fff;overflow-wrap:anywhere}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.25rem;margin:1.6rem 0 .4rem;
border-bottom:2px solid #d0d7de;padding-bottom:.2rem}h3{font-size:1rem;margin:1rem 0 .3rem}
.meta{color:#57606a}.state{display:inline-block;padding:0 .5rem;border-radius:1rem;
background:#ddf4e4;color:#116329;font-weight:600}.state.failed,.state.cancelled{background:#ffebe9;
color:#a40e26}
.cards{display:flex;flex-wrap:wrap;gap:.6rem}.card{flex:1 1 12rem;border:1px solid #d0d7de;
border-radius:.4rem;padding:.5rem .7rem}.card b{display:block;font-size:1.3rem}
.warning{border-left:4px solid #bf8700;background:#fff8c5;padding:.3rem .6rem}
figure{margin:.5rem 0}svg{display:block;width:100%;height:auto;max-width:100%}
figcaption{font-size:.85rem;color:#57606a}
.scroll{overflow-x:auto;max-width:100%;-webkit-overflow-scrolling:touch;border:1px solid #d0d7de;
border-radius:.4rem}
table{border-collapse:collapse;width:100%;font-size:.85rem;font-variant-numeric:tabular-nums}
th,td{padding:.25rem .5rem;border-bottom:1px solid #eaeef2;text-align:right;white-space:nowrap}
th{background:#f6f8fa;position:sticky;top:0}td.l,th.l{text-align:left}
td.reason{white-space:normal;min-width:12rem;text-align:left}
tr.peak td{background:#fff8c5;font-weight:600}tr.bad td{color:#a40e26}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:.4rem;padding:.6rem;
white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1rem;font-size:.8rem;color:#57606a}
.sw{display:inline-block;width:.8rem;height:.8rem;vertical-align:middle;margin-right:.25rem}
svg text{font:12px system-ui,sans-serif;fill:#57606a}svg .axis{stroke:#8c959f}
svg .grid{stroke:#eaeef2}svg .mean{fill:none;stroke:#0969da;stroke-width:2}
svg .predicted{fill:none;stroke:#57606a;stroke-width:1.5;stroke-dasharray:6 4}
svg .pt{fill:#0969da;stroke:#fff;stroke-width:1}svg .pt.cal{fill:#8250df}
svg .err{stroke:#0969da;stroke-width:1.5}svg .bad-region{fill:#cf222e;fill-opacity:.09}
svg .x{stroke:#cf222e;stroke-width:2}svg .peak{fill:none;stroke:#bf8700;stroke-width:2.5}
svg .practice{stroke:#1a7f37;stroke-width:2;stroke-dasharray:6 4}
svg text.peak-label{fill:#9a6700;font-weight:600}svg text.practice-label{fill:#1a7f37}
@media (max-width:40rem){body{padding:.6rem;font-size:14px}h1{font-size:1.25rem}}
@media print{body{max-width:none;padding:0;font-size:10pt}.scroll{overflow:visible;border:0}
th,td{white-space:normal}section.model{break-inside:avoid-page}h2{break-after:avoid}
figure,pre{break-inside:avoid}}
)";

struct ModelData {
  std::map<int64_t, std::vector<double>> speeds;  // ok, non-calibration
  std::set<int64_t> bad;                          // infeasible, failed or preempting
  double y_max = 0;
  int64_t x_lo = 0;
  int64_t x_hi = 0;
};

ModelData Analyse(const crest::v1::ModelReport& m, int64_t practice) {
  ModelData d;
  std::vector<int64_t> xs;
  for (const Trial& t : m.trials()) {
    const int64_t x = t.parameters().max_batch_size();
    if (t.status() == crest::v1::TRIAL_OK) {
      xs.push_back(x);
      d.y_max = std::max(d.y_max, t.result().generate_speed());
      if (!t.calibration() && !t.confirmation()) d.speeds[x].push_back(t.result().generate_speed());
      if (t.result().has_daemon() && t.result().daemon().preemptions() > 0) d.bad.insert(x);
    } else if (t.status() == crest::v1::TRIAL_INFEASIBLE || t.status() == crest::v1::TRIAL_FAILED) {
      xs.push_back(x);
      d.bad.insert(x);
    }
  }
  if (practice > 0) xs.push_back(practice);
  if (xs.empty()) return d;
  // The predicted curve widens the plot to its own range.
  for (const auto& p : m.predicted()) {
    xs.push_back(p.max_batch_size());
    d.y_max = std::max(d.y_max, p.generate_speed());
  }
  d.x_lo = *std::min_element(xs.begin(), xs.end());
  d.x_hi = *std::max_element(xs.begin(), xs.end());
  return d;
}

std::string CurveSvg(const crest::v1::ModelReport& m, const ModelData& d, int64_t practice) {
  constexpr double kW = 640, kH = 300, kL = 64, kR = 16, kT = 16, kB = 44;
  const double span = std::max<double>(1, static_cast<double>(d.x_hi - d.x_lo));
  const double x0 = static_cast<double>(d.x_lo) - span * 0.06;
  const double x1 = static_cast<double>(d.x_hi) + span * 0.06;
  const double y1 = d.y_max > 0 ? d.y_max * 1.12 : 1;
  auto sx = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
  auto sy = [&](double y) { return kH - kB - y / y1 * (kH - kT - kB); };
  std::string s = absl::StrFormat(
      R"(<svg viewBox="0 0 %.0f %.0f" role="img" aria-label="GenerateSpeed against maxBatchSize for %s" preserveAspectRatio="xMidYMid meet">)",
      kW, kH, Esc(m.model()));
  if (!d.bad.empty()) {
    // From just left of the first infeasible or preempting point to the edge.
    const double from = std::max(kL, sx(static_cast<double>(*d.bad.begin()) - span * 0.03));
    absl::StrAppend(
        &s,
        absl::StrFormat(
            R"(<rect class="bad-region" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>infeasible, failed or preempting from maxBatchSize %d</title></rect>)",
            from, kT, kW - kR - from, kH - kT - kB, *d.bad.begin()));
  }
  for (double v : Ticks(0, y1, 5)) {
    absl::StrAppend(
        &s,
        absl::StrFormat(
            R"(<line class="grid" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><text x="%.1f" y="%.1f" text-anchor="end">%g</text>)",
            kL, kW - kR, sy(v), sy(v), kL - 6, sy(v) + 4, v));
  }
  for (double v : Ticks(x0, x1, 7)) {
    absl::StrAppend(
        &s,
        absl::StrFormat(
            R"(<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><text x="%.1f" y="%.1f" text-anchor="middle">%g</text>)",
            sx(v), sx(v), kH - kB, kH - kB + 5, sx(v), kH - kB + 18, v));
  }
  absl::StrAppend(
      &s,
      absl::StrFormat(
          R"(<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>)",
          kL, kW - kR, kH - kB, kH - kB, kL, kL, kT, kH - kB));
  absl::StrAppend(
      &s,
      absl::StrFormat(
          R"svg(<text x="%.1f" y="%.1f" text-anchor="middle">maxBatchSize</text><text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">GenerateSpeed (tokens/s)</text>)svg",
          (kL + kW - kR) / 2, kH - 6, (kT + kH - kB) / 2));
  // The curve through each point's mean, error bars where it has repeats.
  std::vector<std::string> line;
  for (const auto& [x, v] : d.speeds) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    line.push_back(absl::StrFormat("%.1f,%.1f", sx(static_cast<double>(x)), sy(mean)));
    if (v.size() > 1) {
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      const double px = sx(static_cast<double>(x));
      absl::StrAppend(
          &s,
          absl::StrFormat(
              R"(<g class="errbar"><line class="err" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line class="err" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line class="err" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/></g>)",
              px, px, sy(*lo), sy(*hi), px - 5, px + 5, sy(*lo), sy(*lo), px - 5, px + 5, sy(*hi),
              sy(*hi)));
    }
  }
  if (line.size() > 1) {
    absl::StrAppend(&s, R"(<polyline class="mean" points=")", absl::StrJoin(line, " "), "\"/>");
  }
  // search.prior's prediction, dashed, beside what was measured.
  if (m.predicted_size() > 1) {
    std::vector<std::string> predicted;
    for (const auto& p : m.predicted()) {
      predicted.push_back(absl::StrFormat("%.1f,%.1f", sx(static_cast<double>(p.max_batch_size())),
                                          sy(p.generate_speed())));
    }
    absl::StrAppend(&s, R"(<polyline class="predicted" points=")", absl::StrJoin(predicted, " "),
                    "\"><title>predicted by ", Esc(m.predicted_source()), "</title></polyline>");
  }
  // Practice's answer and Crest's peak.
  if (practice > 0) {
    const double px = sx(static_cast<double>(practice));
    absl::StrAppend(
        &s,
        absl::StrFormat(
            R"(<line class="practice" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><text class="practice-label" x="%.1f" y="%.1f" text-anchor="middle">practice %d</text>)",
            px, px, kT, kH - kB, px, kT + 12, practice));
  }
  if (m.has_best()) {
    const int64_t bx = m.best().parameters().max_batch_size();
    const double px = sx(static_cast<double>(bx));
    const double py = sy(m.best().generate_speed());
    // Above the ring, kept inside the plot near its edges.
    const char* anchor = px > kW - kR - 40 ? "end" : px < kL + 40 ? "start" : "middle";
    absl::StrAppend(
        &s,
        absl::StrFormat(
            R"(<circle class="peak" cx="%.1f" cy="%.1f" r="9"/><text class="peak-label" x="%.1f" y="%.1f" text-anchor="%s">peak %d</text>)",
            px, py, px, std::max(kT + 12, py - 16), anchor, bx));
  }
  // One point per ok trial (calibration runs in violet); a cross on the axis
  // for each infeasible or failed one.
  for (const Trial& t : m.trials()) {
    const double px = sx(static_cast<double>(t.parameters().max_batch_size()));
    if (t.status() == crest::v1::TRIAL_OK) {
      absl::StrAppend(
          &s,
          absl::StrFormat(
              R"(<circle class="pt%s" data-trial="%s" cx="%.1f" cy="%.1f" r="5"><title>%s: maxBatchSize %d, %.1f tokens/s on %s%s</title></circle>)",
              t.calibration() ? " cal" : "", Esc(t.id()), px, sy(t.result().generate_speed()),
              Esc(t.id()), t.parameters().max_batch_size(), t.result().generate_speed(),
              Esc(t.node()), t.calibration() ? " (calibration)" : ""));
    } else if (t.status() == crest::v1::TRIAL_INFEASIBLE || t.status() == crest::v1::TRIAL_FAILED) {
      const double py = kH - kB;
      absl::StrAppend(
          &s,
          absl::StrFormat(
              R"(<path class="x" d="M%.1f %.1fl10 10m0 -10l-10 10"><title>%s: maxBatchSize %d %s</title></path>)",
              px - 5, py - 5, Esc(t.id()), t.parameters().max_batch_size(),
              TrialStatusName(t.status())));
    }
  }
  absl::StrAppend(&s, "</svg>");
  return s;
}

std::string TrialTable(const crest::v1::ModelReport& m) {
  const int64_t peak = m.has_best() ? m.best().parameters().max_batch_size() : -1;
  std::string s =
      R"(<div class="scroll"><table><thead><tr><th class="l">trial</th><th class="l">node</th><th>maxBatchSize</th><th>maxPrefillBatchSize</th><th>selectBatch</th><th class="l">status</th><th>repeat</th><th>attempt</th><th>GenerateSpeed</th><th>PerClient</th><th>FirstToken ms</th><th>P99 ms</th><th>Decode ms</th><th>P99 ms</th><th>preempt.</th><th>ok/failed</th><th class="l">reason</th></tr></thead><tbody>)";
  for (const Trial& t : m.trials()) {
    const auto& p = t.parameters();
    const auto& r = t.result();
    const bool ok = t.status() == crest::v1::TRIAL_OK;
    const char* cls = ok && p.max_batch_size() == peak && !t.calibration() ? "peak"
                      : ok                                                 ? ""
                                                                           : "bad";
    auto num = [&](double v, int digits) {
      return ok ? absl::StrFormat("%.*f", digits, v) : std::string("-");
    };
    std::string preempt = "-";
    if (r.has_daemon() && r.daemon().has_preemptions()) {
      preempt = absl::StrCat(r.daemon().preemptions());
    }
    absl::StrAppend(
        &s,
        absl::StrFormat(R"(<tr class="%s"><td class="l">%s%s</td><td class="l">%s</td>)", cls,
                        Esc(t.id()), t.calibration() ? " (cal.)" : "", Esc(t.node())),
        absl::StrFormat("<td>%d</td><td>%d</td><td>%s</td>", p.max_batch_size(),
                        p.max_prefill_batch_size(), p.support_select_batch() ? "on" : "off"),
        absl::StrFormat(R"(<td class="l">%s</td><td>%d</td><td>%d</td>)",
                        TrialStatusName(t.status()), t.repeat(), t.attempt()),
        "<td>", num(r.generate_speed(), 1), "</td><td>", num(r.generate_speed_per_client(), 3),
        "</td><td>", num(r.first_token_time().average_ms(), 1), "</td><td>",
        num(r.first_token_time().p99_ms(), 1), "</td><td>", num(r.decode_time().average_ms(), 2),
        "</td><td>", num(r.decode_time().p99_ms(), 2), "</td><td>", preempt, "</td>",
        absl::StrFormat("<td>%s</td>", ok ? absl::StrCat(r.succeeded(), "/", r.failed()) : "-"),
        R"(<td class="reason">)", Esc(t.reason()), "</td></tr>");
  }
  absl::StrAppend(&s, "</tbody></table></div>");
  return s;
}

std::string ScheduleConfigSnippet(const crest::v1::BestConfig& best) {
  const auto& p = best.parameters();
  nlohmann::ordered_json schedule;
  schedule["maxBatchSize"] = p.max_batch_size();
  schedule["maxPrefillBatchSize"] = p.max_prefill_batch_size();
  schedule["supportSelectBatch"] = p.support_select_batch();
  if (p.support_select_batch()) {
    schedule["prefillTimeMsPerReq"] =
        static_cast<int64_t>(std::llround(p.prefill_time_ms_per_req()));
    schedule["decodeTimeMsPerReq"] = static_cast<int64_t>(std::llround(p.decode_time_ms_per_req()));
  }
  nlohmann::ordered_json j;
  j["ScheduleConfig"] = schedule;
  return absl::StrCat("<pre><code>", Esc(j.dump(2)), "</code></pre>");
}

std::string HostSection(const crest::v1::Campaign* campaign) {
  if (campaign == nullptr) return "<p class=\"meta\">Host settings: not known.</p>";
  const auto& h = campaign->spec().host();
  auto or_left = [](const std::string& v) { return v.empty() ? std::string("left alone") : v; };
  std::string pin = h.pin().mode() == crest::v1::PINNING_MODE_UNSPECIFIED
                        ? "none"
                        : absl::AsciiStrToLower(absl::StripPrefix(
                              crest::v1::PinningMode_Name(h.pin().mode()), "PINNING_"));
  return absl::StrCat(
      R"(<div class="scroll"><table><tbody><tr><th class="l">CPU governor</th><td class="l">)",
      Esc(or_left(h.governor())),
      R"(</td></tr><tr><th class="l">transparent huge pages</th><td class="l">)",
      Esc(or_left(h.thp())), R"(</td></tr><tr><th class="l">daemon pinning</th><td class="l">)",
      Esc(pin), h.pin().cpu_list().empty() ? "" : " " + Esc(h.pin().cpu_list()),
      "</td></tr></tbody></table></div><p class=\"meta\">Applied on every node for the campaign "
      "and restored at its end.</p>");
}

std::string Timeline(const HtmlReportInput& in) {
  struct Event {
    double at;
    std::string what;
  };
  std::vector<Event> events;
  const crest::v1::Campaign* c = in.campaign;
  if (c != nullptr) {
    if (Set(c->created())) events.push_back({Seconds(c->created()), "campaign created"});
    if (Set(c->started())) events.push_back({Seconds(c->started()), "campaign started"});
    if (Set(c->finished())) {
      events.push_back(
          {Seconds(c->finished()), absl::StrCat("campaign ended: ", CampaignStateName(c->state()),
                                                c->reason().empty() ? "" : " - " + c->reason())});
    }
  }
  for (const auto& m : in.report.models()) {
    for (const Trial& t : m.trials()) {
      if (!Set(t.started())) continue;
      std::string took;
      if (Set(t.finished())) {
        took = absl::StrFormat(" in %.1f s", Seconds(t.finished()) - Seconds(t.started()));
      }
      events.push_back(
          {Seconds(t.started()), absl::StrFormat("%s %s maxBatchSize %d on %s: %s%s", t.id(),
                                                 m.model(), t.parameters().max_batch_size(),
                                                 t.node(), TrialStatusName(t.status()), took)});
    }
  }
  if (events.empty()) return "<p class=\"meta\">No times recorded.</p>";
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.at < b.at; });
  std::string s =
      R"(<div class="scroll"><table><thead><tr><th class="l">time (UTC)</th><th>+s</th><th class="l">event</th></tr></thead><tbody>)";
  const double t0 = events.front().at;
  for (const auto& e : events) {
    google::protobuf::Timestamp ts;
    ts.set_seconds(static_cast<int64_t>(e.at));
    ts.set_nanos(static_cast<int32_t>((e.at - std::floor(e.at)) * 1e9));
    absl::StrAppend(
        &s,
        absl::StrFormat(R"(<tr><td class="l">%s</td><td>%.1f</td><td class="reason">%s</td></tr>)",
                        FormatTimestamp(ts), e.at - t0, Esc(e.what)));
  }
  absl::StrAppend(&s, "</tbody></table></div>");
  return s;
}

}  // namespace

std::string ReportToHtml(const HtmlReportInput& in) {
  const auto& r = in.report;
  const std::string title =
      absl::StrCat("Crest campaign ", r.id(), r.name().empty() ? "" : " (" + r.name() + ")");
  std::string s = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>",
      Esc(title), "</title><style>", kStyle, "</style></head><body>\n<header><h1>", Esc(title),
      R"(</h1><p class="meta">State <span class="state )", CampaignStateName(r.state()), "\">",
      CampaignStateName(r.state()), "</span>");
  if (in.campaign != nullptr && Set(in.campaign->created())) {
    absl::StrAppend(&s, " &middot; created ", FormatTimestamp(in.campaign->created()));
  }
  if (in.campaign != nullptr && !in.campaign->reason().empty()) {
    absl::StrAppend(&s, " &middot; ", Esc(in.campaign->reason()));
  }
  absl::StrAppend(&s, "</p>");
  for (const std::string& w : r.warnings()) {
    absl::StrAppend(&s, "<p class=\"warning\">", Esc(w), "</p>");
  }
  absl::StrAppend(&s, "<div class=\"cards\">");
  for (const auto& m : r.models()) {
    absl::StrAppend(&s, "<div class=\"card\">", Esc(m.model()));
    if (m.has_best()) {
      absl::StrAppend(
          &s, absl::StrFormat("<b>maxBatchSize %d</b>%.1f tokens/s",
                              m.best().parameters().max_batch_size(), m.best().generate_speed()));
      if (m.best().untrusted()) absl::StrAppend(&s, " (untrusted: every run flagged)");
    } else {
      absl::StrAppend(&s, "<b>no result</b>");
    }
    absl::StrAppend(&s, "</div>");
  }
  absl::StrAppend(&s, "</div></header>\n");
  for (const auto& m : r.models()) {
    auto it = in.practice_max_batch_size.find(m.model());
    const int64_t practice = it == in.practice_max_batch_size.end() ? 0 : it->second;
    const ModelData d = Analyse(m, practice);
    absl::StrAppend(&s, "<section class=\"model\"><h2>", Esc(m.model()), "</h2>");
    if (d.x_hi == 0) {
      absl::StrAppend(&s, "<p>No trial measured.</p>");
    } else {
      absl::StrAppend(
          &s, "<figure>", CurveSvg(m, d, practice),
          R"(<figcaption><span class="legend"><span><span class="sw" style="background:#0969da"></span>trial (line: mean per point, bars: spread over repeats)</span><span><span class="sw" style="background:#8250df"></span>calibration</span><span><span class="sw" style="border:2px solid #bf8700;border-radius:50%"></span>Crest's peak</span>)",
          practice > 0
              ? R"(<span><span class="sw" style="border-top:2px dashed #1a7f37"></span>the practice's answer</span>)"
              : "",
          m.predicted_size() > 1
              ? R"(<span><span class="sw" style="border-top:2px dashed #57606a"></span>predicted (search.prior)</span>)"
              : "",
          R"(<span><span class="sw" style="background:#f6d5d8"></span>infeasible / failed / preempting</span></span></figcaption></figure>)");
    }
    if (m.has_best()) {
      absl::StrAppend(&s,
                      m.best().untrusted() ? "<h3>Fastest flagged point (every run flagged: not a "
                                             "recommendation)</h3>"
                                           : "<h3>Chosen configuration (config.json)</h3>",
                      ScheduleConfigSnippet(m.best()));
      if (!m.best().basis().empty()) {
        absl::StrAppend(&s, "<p class=\"basis\">The answer rests on: <b>", Esc(m.best().basis()),
                        "</b>", m.best().basis_reason().empty() ? "" : " &mdash; ",
                        Esc(m.best().basis_reason()), "</p>");
      }
    }
    absl::StrAppend(&s, "<h3>Trials</h3>", TrialTable(m), "</section>\n");
  }
  absl::StrAppend(&s, "<section><h2>Host settings</h2>", HostSection(in.campaign),
                  "</section>\n<section><h2>Timeline</h2>", Timeline(in),
                  "</section>\n<footer class=\"meta\"><p>Written by <code>crest campaign report "
                  "--format html</code>.</p></footer></body></html>\n");
  return s;
}

}  // namespace crest::controller
