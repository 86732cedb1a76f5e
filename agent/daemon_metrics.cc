#include "agent/daemon_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "agent/http_probe.h"

namespace crest::agent {
namespace {

// A daemon's /metrics is a few kilobytes; anything far larger is not it.
constexpr size_t kMaxMetricsBytes = size_t{8} << 20;
constexpr absl::Duration kScrapeTimeout = absl::Seconds(3);

bool IsNameStart(char c, bool colon) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || (colon && c == ':');
}
bool IsNameChar(char c, bool colon) {
  return IsNameStart(c, colon) || absl::ascii_isdigit(static_cast<unsigned char>(c));
}

// Reads a sample line; `rest` is consumed as it goes.
class LineParser {
 public:
  explicit LineParser(absl::string_view line) : rest_(line) {}

  absl::StatusOr<PromSample> Parse() {
    PromSample s;
    s.name = Name(/*colon=*/true);
    if (s.name.empty()) return Error("expected a metric name");
    if (!rest_.empty() && rest_.front() == '{') {
      rest_.remove_prefix(1);
      absl::Status labels = Labels(&s.labels);
      if (!labels.ok()) return labels;
    }
    if (!SkipBlanks()) return Error("expected a value after the metric name");
    absl::string_view value = Token();
    absl::StatusOr<double> v = Value(value);
    if (!v.ok()) return v.status();
    s.value = *v;
    if (SkipBlanks()) {
      absl::string_view ts = Token();
      int64_t ms = 0;
      if (!absl::SimpleAtoi(ts, &ms)) {
        return Error(absl::StrCat("expected an integer timestamp in ms, got \"", ts, "\""));
      }
      s.timestamp_ms = ms;
      if (SkipBlanks())
        return Error(absl::StrCat("unexpected \"", rest_, "\" after the timestamp"));
    }
    return s;
  }

 private:
  absl::Status Error(const std::string& what) const { return absl::InvalidArgumentError(what); }

  std::string Name(bool colon) {
    size_t n = 0;
    if (n < rest_.size() && IsNameStart(rest_[n], colon)) {
      ++n;
      while (n < rest_.size() && IsNameChar(rest_[n], colon)) ++n;
    }
    std::string name(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return name;
  }

  // Skips spaces and tabs; true when something follows them.
  bool SkipBlanks() {
    size_t n = 0;
    while (n < rest_.size() && (rest_[n] == ' ' || rest_[n] == '\t')) ++n;
    rest_.remove_prefix(n);
    return !rest_.empty();
  }

  absl::string_view Token() {
    size_t n = 0;
    while (n < rest_.size() && rest_[n] != ' ' && rest_[n] != '\t') ++n;
    absl::string_view t = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return t;
  }

  // After '{': label="value" pairs separated by commas (a trailing comma is
  // allowed), then '}'.
  absl::Status Labels(std::map<std::string, std::string>* labels) {
    while (true) {
      SkipBlanks();
      if (!rest_.empty() && rest_.front() == '}') {
        rest_.remove_prefix(1);
        return absl::OkStatus();
      }
      std::string key = Name(/*colon=*/false);
      if (key.empty()) return Error("expected a label name or '}'");
      SkipBlanks();
      if (rest_.empty() || rest_.front() != '=') {
        return Error(absl::StrCat("expected '=' after label ", key));
      }
      rest_.remove_prefix(1);
      SkipBlanks();
      if (rest_.empty() || rest_.front() != '"') {
        return Error(absl::StrCat("expected '\"' to open the value of label ", key));
      }
      rest_.remove_prefix(1);
      std::string value;
      bool closed = false;
      while (!rest_.empty()) {
        char c = rest_.front();
        rest_.remove_prefix(1);
        if (c == '"') {
          closed = true;
          break;
        }
        if (c != '\\') {
          value.push_back(c);
          continue;
        }
        if (rest_.empty()) break;
        char e = rest_.front();
        rest_.remove_prefix(1);
        if (e == 'n') {
          value.push_back('\n');
        } else if (e == '\\' || e == '"') {
          value.push_back(e);
        } else {
          return Error(absl::StrCat("unknown escape \\", std::string(1, e), " in label ", key,
                                    R"( (expected \\, \" or \n))"));
        }
      }
      if (!closed) return Error(absl::StrCat("unterminated value of label ", key));
      if (!labels->emplace(key, std::move(value)).second) {
        return Error(absl::StrCat("label ", key, " given twice"));
      }
      SkipBlanks();
      if (!rest_.empty() && rest_.front() == ',') {
        rest_.remove_prefix(1);
      } else if (rest_.empty() || rest_.front() != '}') {
        return Error(absl::StrCat("expected ',' or '}' after label ", key));
      }
    }
  }

  absl::StatusOr<double> Value(absl::string_view t) const {
    if (t == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (t == "+Inf" || t == "Inf") return std::numeric_limits<double>::infinity();
    if (t == "-Inf") return -std::numeric_limits<double>::infinity();
    double v = 0;
    // SimpleAtod would also take "nan", "inf" or "0x1p3": the format does not.
    bool plain = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' ||
             c == 'E' || c == '+' || c == '-';
    });
    if (!plain || !absl::SimpleAtod(t, &v)) {
      return Error(
          absl::StrCat("expected a number, NaN or +Inf/-Inf as the value, got \"", t, "\""));
    }
    return v;
  }

  absl::string_view rest_;
};

std::optional<double> Find(const MetricTotals& m, const char* name) {
  auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

// KV-cache use of one scrape: npu_cache_usage_perc, else blocks used/total.
std::optional<double> CacheUsage(const MetricTotals& m) {
  if (auto u = Find(m, kCacheUsageMetric)) return u;
  auto used = Find(m, kBlocksUsedMetric);
  auto total = Find(m, kBlocksTotalMetric);
  if (used && total && *total > 0) return *used / *total;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::vector<PromSample>> ParsePrometheusText(absl::string_view text) {
  std::vector<PromSample> out;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    absl::StatusOr<PromSample> s = LineParser(trimmed).Parse();
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("metrics line ", number, ": ",
                                                     s.status().message(), " in \"",
                                                     trimmed.substr(0, 200), "\""));
    }
    out.push_back(*std::move(s));
  }
  return out;
}

MetricTotals TotalsOf(const std::vector<PromSample>& samples) {
  MetricTotals totals;
  for (const PromSample& s : samples) {
    if (std::isnan(s.value)) continue;
    totals[s.name] += s.value;
  }
  return totals;
}

crest::v1::DaemonRunMetrics Summarize(const std::optional<MetricTotals>& before,
                                      const std::vector<MetricTotals>& during,
                                      const std::optional<MetricTotals>& after,
                                      std::vector<std::string>* errors) {
  crest::v1::DaemonRunMetrics m;
  m.set_samples(static_cast<uint32_t>(during.size()));
  auto delta = [&](const char* name) -> std::optional<uint64_t> {
    if (!before || !after) return std::nullopt;
    auto b = Find(*before, name);
    auto a = Find(*after, name);
    if (!b || !a || !std::isfinite(*b) || !std::isfinite(*a)) return std::nullopt;
    if (*a < *b) {
      errors->push_back(absl::StrCat(name, " went down from ", *b, " to ", *a,
                                     " during the run (daemon restarted?)"));
      return std::nullopt;
    }
    return static_cast<uint64_t>(std::llround(*a - *b));
  };
  if (auto d = delta(kPreemptionsMetric)) m.set_preemptions(*d);
  if (auto d = delta(kSucceededMetric)) m.set_succeeded(*d);
  if (auto d = delta(kFailedMetric)) m.set_failed(*d);

  std::vector<const MetricTotals*> all;
  if (before) all.push_back(&*before);
  for (const MetricTotals& t : during) all.push_back(&t);
  if (after) all.push_back(&*after);
  auto peak = [&](const std::function<std::optional<double>(const MetricTotals&)>& read) {
    std::optional<double> best;
    for (const MetricTotals* t : all) {
      std::optional<double> v = read(*t);
      if (v && std::isfinite(*v) && (!best || *v > *best)) best = v;
    }
    return best;
  };
  auto gauge = [](const char* name) {
    return [name](const MetricTotals& t) { return Find(t, name); };
  };
  if (auto p = peak(gauge(kRunningMetric))) {
    m.set_peak_running(static_cast<uint64_t>(std::llround(std::max(0.0, *p))));
  }
  if (auto p = peak(gauge(kWaitingMetric))) {
    m.set_peak_waiting(static_cast<uint64_t>(std::llround(std::max(0.0, *p))));
  }
  if (auto p = peak(CacheUsage)) m.set_peak_kv_cache_usage(*p);
  return m;
}

DaemonMetricsRecorder::DaemonMetricsRecorder(Fetch fetch, absl::Duration period)
    : fetch_(std::move(fetch)), period_(period) {}

DaemonMetricsRecorder::~DaemonMetricsRecorder() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (sampler_.joinable()) sampler_.join();
}

std::optional<MetricTotals> DaemonMetricsRecorder::Scrape(const char* when) {
  absl::StatusOr<std::string> text = fetch_();
  absl::StatusOr<std::vector<PromSample>> samples =
      text.ok() ? ParsePrometheusText(*text) : text.status();
  if (!samples.ok()) {
    absl::MutexLock lock(&mu_);
    if (when != nullptr) {
      errors_.push_back(absl::StrCat("scrape ", when, " the run: ", samples.status().message()));
    } else if (failed_samples_++ == 0) {
      errors_.push_back(absl::StrCat("sample during the run: ", samples.status().message()));
    }
    return std::nullopt;
  }
  return TotalsOf(*samples);
}

void DaemonMetricsRecorder::Begin() {
  std::optional<MetricTotals> before = Scrape("before");
  absl::MutexLock lock(&mu_);
  if (begun_) return;
  begun_ = true;
  before_ = std::move(before);
  if (period_ > absl::ZeroDuration() && period_ != absl::InfiniteDuration()) {
    sampler_ = std::thread([this] { SamplerLoop(); });
  }
}

void DaemonMetricsRecorder::Sample() {
  std::optional<MetricTotals> t = Scrape(nullptr);
  if (!t) return;
  absl::MutexLock lock(&mu_);
  during_.push_back(*std::move(t));
}

void DaemonMetricsRecorder::SamplerLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), period_);
      if (stop_) return;
    }
    Sample();
  }
}

std::optional<crest::v1::DaemonRunMetrics> DaemonMetricsRecorder::End() {
  {
    absl::MutexLock lock(&mu_);
    if (!begun_) return std::nullopt;
    stop_ = true;
  }
  if (sampler_.joinable()) sampler_.join();
  std::optional<MetricTotals> after = Scrape("after");
  absl::MutexLock lock(&mu_);
  if (failed_samples_ > 1) {
    errors_.push_back(absl::StrCat(failed_samples_, " samples during the run failed"));
  }
  crest::v1::DaemonRunMetrics m = Summarize(before_, during_, after, &errors_);
  if (!errors_.empty()) m.set_error(absl::StrJoin(errors_, "; "));
  return m;
}

DaemonMetricsRecorder::Fetch MetricsFetcher(std::string url, std::string ca_file) {
  return [url = std::move(url), ca_file = std::move(ca_file)]() {
    return HttpGetBody(url, kScrapeTimeout, ca_file, kMaxMetricsBytes);
  };
}

}  // namespace crest::agent
