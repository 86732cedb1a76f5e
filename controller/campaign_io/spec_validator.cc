#include "controller/campaign_io/spec_validator.h"

#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "common/cpu_list.h"
#include "common/mindie_limits.h"
#include "controller/campaign_io/batch_fill.h"
#include "controller/search/search_names.h"

namespace crest::controller {
namespace {

using mindie::kMaxBatchSize;

bool IsUnset(const google::protobuf::Duration& d) { return d.seconds() == 0 && d.nanos() == 0; }

void SetSeconds(google::protobuf::Duration* d, int64_t seconds) {
  d->set_seconds(seconds);
  d->set_nanos(0);
}

}  // namespace

void ApplySpecDefaults(crest::v1::CampaignSpec* spec) {
  for (auto& m : *spec->mutable_models()) {
    if (m.parallel() == 0) m.set_parallel(1);
    if (m.profile().empty()) m.set_profile(m.name());
  }
  auto* s = spec->mutable_search();
  if (s->parameter().empty()) s->set_parameter("maxBatchSize");
  if (s->range_lo() == 0 && s->range_hi() == 0) s->set_range_auto(true);
  if (s->initial() == 0) s->set_initial_auto(true);
  if (s->step() == 0) s->set_step(kDefaultStep);
  if (s->strategy().empty()) s->set_strategy(kDefaultStrategy);
  if (s->repeats() == 0) s->set_repeats(1);
  if (s->tolerance() == 0) s->set_tolerance(kDefaultTolerance);
  if (s->max_trials() == 0) s->set_max_trials(kDefaultMaxTrials);
  if (s->cache_block_size() == 0) s->set_cache_block_size(kDefaultCacheBlockSize);
  auto* c = spec->mutable_client();
  if (c->mode() == crest::v1::CLIENT_MODE_UNSPECIFIED)
    c->set_mode(crest::v1::CLIENT_MODE_CONCURRENCY);
  if (c->mode() == crest::v1::CLIENT_MODE_RATE && c->concurrency() == 0) {
    c->set_concurrency(kDefaultRateConcurrency);
  }
  if (c->distribution() == crest::v1::ARRIVAL_DISTRIBUTION_UNSPECIFIED) {
    c->set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_POISSON);
  }
  if (c->dataset().type() == crest::v1::DATASET_TYPE_UNSPECIFIED) {
    c->mutable_dataset()->set_type(crest::v1::DATASET_TYPE_GSM8K);
  }
  if (c->max_output_len() == 0) c->set_max_output_len(kDefaultMaxOutputLen);
  if (c->api() == crest::v1::BENCHMARK_API_UNSPECIFIED) c->set_api(crest::v1::BENCHMARK_API_MINDIE);
  if (c->task_kind() == crest::v1::TASK_KIND_UNSPECIFIED) {
    c->set_task_kind(crest::v1::TASK_KIND_STREAM);
  }
  if (spec->has_rate_search()) {
    auto* r = spec->mutable_rate_search();
    if (r->factor() == 0) r->set_factor(kDefaultRateFactor);
    if (r->max_runs() == 0) r->set_max_runs(kDefaultRateMaxRuns);
    if (r->concurrency() == 0) r->set_concurrency(kDefaultRateConcurrency);
  }
  auto* h = spec->mutable_host();
  if (h->pin().mode() == crest::v1::PINNING_MODE_UNSPECIFIED) {
    h->mutable_pin()->set_mode(crest::v1::PINNING_NONE);
  }
  auto* l = spec->mutable_limits();
  if (IsUnset(l->start_timeout())) SetSeconds(l->mutable_start_timeout(), 300);
  if (IsUnset(l->benchmark_timeout())) SetSeconds(l->mutable_benchmark_timeout(), 1800);
  if (l->max_retries() == 0) l->set_max_retries(kDefaultMaxRetries);
}

namespace {

// "path: what" for the first field over its size limit; empty when none is.
std::string SpecSizeProblem(const crest::v1::CampaignSpec& spec) {
  constexpr size_t kName = 256;
  constexpr size_t kPath = 4096;
  constexpr int kModels = 64;
  constexpr int kNodes = 4096;
  constexpr int kSelector = 32;
  auto too_long = [](const std::string& path, const std::string& value, size_t max) {
    return value.size() > max
               ? absl::StrCat(path, ": at most ", max, " characters, got ", value.size())
               : std::string();
  };
  std::string p = too_long("name", spec.name(), kName);
  if (!p.empty()) return p;
  if (spec.models_size() > kModels) {
    return absl::StrCat("models: at most ", kModels, " models, got ", spec.models_size());
  }
  for (int i = 0; i < spec.models_size(); ++i) {
    const auto& m = spec.models(i);
    std::string path = absl::StrCat("models[", i, "]");
    for (const auto& [field, value, max] :
         {std::tuple{".name", &m.name(), kName}, std::tuple{".profile", &m.profile(), kPath},
          std::tuple{".model_path", &m.model_path(), kPath}}) {
      if (p = too_long(path + field, *value, max); !p.empty()) return p;
    }
    if (m.nodes_size() > kNodes) {
      return absl::StrCat(path, ".nodes: at most ", kNodes, " nodes, got ", m.nodes_size());
    }
    for (int j = 0; j < m.nodes_size(); ++j) {
      if (p = too_long(absl::StrCat(path, ".nodes[", j, "]"), m.nodes(j), kName); !p.empty()) {
        return p;
      }
    }
    if (m.selector_size() > kSelector) {
      return absl::StrCat(path, ".selector: at most ", kSelector, " labels, got ",
                          m.selector_size());
    }
    for (const auto& [k, v] : m.selector()) {
      if (k.size() > kName || v.size() > kName) {
        return absl::StrCat(path, ".selector: keys and values of at most ", kName, " characters");
      }
    }
  }
  const auto& s = spec.search();
  for (const auto& [field, value] :
       {std::pair{"search.parameter", &s.parameter()}, std::pair{"search.strategy", &s.strategy()},
        std::pair{"client.dataset.path", &spec.client().dataset().name()},
        std::pair{"host.governor", &spec.host().governor()},
        std::pair{"host.thp", &spec.host().thp()},
        std::pair{"host.pin.cpu_list", &spec.host().pin().cpu_list()}}) {
    if (p = too_long(field, *value, field == std::string("host.pin.cpu_list") ? kPath : kName);
        !p.empty()) {
      return p;
    }
  }
  return "";
}

// ValidateCampaignSpec's meaning checks, one section of the spec at a time,
// in the order the spec lists them (so are its problems).
class SpecChecker {
 public:
  explicit SpecChecker(const crest::v1::CampaignSpec& spec) : spec_(spec) {}

  std::vector<SpecProblem> Check() {
    if (spec_.name().empty()) Add("name", "required: a name for the campaign");
    CheckModels();
    CheckSearch();
    CheckEnumValues();
    CheckClient();
    if (spec_.has_rate_search()) CheckRateSearch();
    CheckHost();
    CheckLimits();
    for (SpecProblem& p : CheckBatchCanFill(spec_)) problems_.push_back(std::move(p));
    return std::move(problems_);
  }

 private:
  void Add(std::string path, std::string message) {
    problems_.push_back({std::move(path), 0, std::move(message)});
  }

  void CheckModels() {
    if (spec_.models().empty()) Add("models", "required: at least one model");
    std::set<std::string> seen;
    for (int i = 0; i < spec_.models_size(); ++i) {
      const auto& m = spec_.models(i);
      std::string path = absl::StrCat("models[", i, "]");
      if (m.name().empty()) Add(path + ".name", "required: the model name the daemon serves");
      if (!m.name().empty() && !seen.insert(m.name()).second) {
        Add(path + ".name", absl::StrCat("model '", m.name(), "' is listed twice"));
      }
      if (!m.nodes().empty() && !m.selector().empty()) {
        Add(path, "give either nodes or selector, not both");
      }
      std::set<std::string> nodes;
      for (int j = 0; j < m.nodes_size(); ++j) {
        if (m.nodes(j).empty()) Add(absl::StrCat(path, ".nodes[", j, "]"), "empty node name");
        if (!nodes.insert(m.nodes(j)).second) {
          Add(absl::StrCat(path, ".nodes[", j, "]"),
              absl::StrCat("node '", m.nodes(j), "' is listed twice"));
        }
      }
      // `parallel` counts daemon slots, several per node on an agent with
      // slots: it may exceed the nodes listed (what is not there waits).
      if (m.parallel() == 0) Add(path + ".parallel", "must be at least 1");
    }
  }

  void CheckSearch() {
    const auto& s = spec_.search();
    if (s.parameter() != "maxBatchSize") {
      Add("search.parameter", absl::StrCat("unsupported parameter '", s.parameter(),
                                           "' (only maxBatchSize is searched)"));
    }
    if (!s.range_auto()) {
      if (!kMaxBatchSize.Contains(s.range_lo()) || !kMaxBatchSize.Contains(s.range_hi())) {
        Add("search.range", absl::StrCat("bounds must lie in ", kMaxBatchSize.ToString()));
      } else if (s.range_lo() > s.range_hi()) {
        Add("search.range", absl::StrCat("lo ", s.range_lo(), " is above hi ", s.range_hi()));
      }
      if (!s.initial_auto() && (s.initial() < s.range_lo() || s.initial() > s.range_hi())) {
        Add("search.initial", absl::StrCat("initial ", s.initial(), " lies outside the range [",
                                           s.range_lo(), ", ", s.range_hi(), "]"));
      }
    }
    if (!s.initial_auto() && !kMaxBatchSize.Contains(s.initial())) {
      Add("search.initial", absl::StrCat("must lie in ", kMaxBatchSize.ToString()));
    }
    if (s.step() < 1) Add("search.step", "must be at least 1");
    auto strategies = KnownStrategies();
    if (std::find(strategies.begin(), strategies.end(), s.strategy()) == strategies.end()) {
      std::string hint = ClosestMatch(s.strategy(), strategies);
      Add("search.strategy",
          absl::StrCat("unknown strategy '", s.strategy(),
                       "' (known: ", absl::StrJoin(strategies, ", "), ")",
                       hint.empty() ? "" : absl::StrCat("; did you mean '", hint, "'?")));
    }
    if (!s.prior().empty() && StrategyKindOf(s.strategy()) != StrategyKind::kKnee) {
      Add("search.prior",
          absl::StrCat("a warm start needs the default strategy (knee), not '", s.strategy(), "'"));
    }
    if (s.repeats() < 1 || s.repeats() > 100) Add("search.repeats", "must lie in [1, 100]");
    if (s.tolerance() < 0 || s.tolerance() >= 1) {
      Add("search.tolerance", "must lie in [0, 1) (a relative drop such as 0.02)");
    }
    if (s.max_trials() < 1) Add("search.max_trials", "must be at least 1");
  }

  // Values beyond each enum (a hand-made request; YAML names only known ones).
  void CheckEnumValues() {
    const auto& c = spec_.client();
    for (const auto& [path, valid, value] :
         {std::tuple{"client.mode", crest::v1::ClientMode_IsValid(c.mode()),
                     static_cast<int>(c.mode())},
          std::tuple{"client.api", crest::v1::BenchmarkApi_IsValid(c.api()),
                     static_cast<int>(c.api())},
          std::tuple{"client.task_kind", crest::v1::TaskKind_IsValid(c.task_kind()),
                     static_cast<int>(c.task_kind())},
          std::tuple{"client.distribution",
                     crest::v1::ArrivalDistribution_IsValid(c.distribution()),
                     static_cast<int>(c.distribution())},
          std::tuple{"client.dataset.type", crest::v1::DatasetType_IsValid(c.dataset().type()),
                     static_cast<int>(c.dataset().type())},
          std::tuple{"host.pin.mode", crest::v1::PinningMode_IsValid(spec_.host().pin().mode()),
                     static_cast<int>(spec_.host().pin().mode())}}) {
      if (!valid) Add(path, absl::StrCat("unknown value ", value));
    }
  }

  void CheckClient() {
    const auto& c = spec_.client();
    if (c.mode() == crest::v1::CLIENT_MODE_RATE && c.request_rate() <= 0) {
      Add("client.request_rate", "required in rate mode: requests per second above 0");
    }
    if (c.mode() == crest::v1::CLIENT_MODE_CONCURRENCY && c.request_rate() > 0) {
      Add("client.request_rate",
          "only used in rate mode (set client.mode: rate, or remove request_rate)");
    }
    if (c.mode() == crest::v1::CLIENT_MODE_CONCURRENCY && c.concurrency() > 0) {
      Add("client.concurrency",
          "derived in concurrency mode (maxBatchSize - 1); only rate mode takes it");
    }
    if (c.dataset().type() == crest::v1::DATASET_TYPE_SYNTHETIC &&
        c.dataset().synthetic_input_tokens() == 0) {
      Add("client.dataset.input_tokens", "required for a synthetic dataset");
    }
    if (c.dataset().type() == crest::v1::DATASET_TYPE_JSONL && c.dataset().name().empty()) {
      Add("client.dataset.path", "required for a jsonl dataset (a dataset the agents know)");
    }
    const std::string& name = c.dataset().name();
    if (!name.empty() && (name.front() == '/' || name.find("..") != std::string::npos)) {
      Add("client.dataset.path",
          "must be relative to the agents' data directory (no leading '/', no '..')");
    }
    if (c.max_output_len() < 1) Add("client.max_output_len", "must be at least 1");
  }

  void CheckRateSearch() {
    const auto& r = spec_.rate_search();
    if (r.start() < 0) Add("rate_search.start", "must be auto or requests per second above 0");
    if (r.factor() <= 1 || r.factor() > 4) {
      Add("rate_search.factor",
          absl::StrCat("must lie in (1, 4] (each rate is the one before x factor), got ",
                       r.factor()));
    }
    if (r.max_runs() < 2 || r.max_runs() > 50) {
      Add("rate_search.max_runs",
          absl::StrCat("must lie in [2, 50] (a rise needs two runs), got ", r.max_runs()));
    }
    if (r.concurrency() < bench::kConcurrency.min || r.concurrency() > bench::kConcurrency.max) {
      Add("rate_search.concurrency", absl::StrCat("must lie in [", bench::kConcurrency.min, ", ",
                                                  bench::kConcurrency.max, "]"));
    }
  }

  void CheckHost() {
    const auto& h = spec_.host();
    static const std::vector<std::string> kGovernors = {"performance",  "powersave", "ondemand",
                                                        "conservative", "schedutil", "userspace"};
    if (!h.governor().empty() &&
        std::find(kGovernors.begin(), kGovernors.end(), h.governor()) == kGovernors.end()) {
      std::string hint = ClosestMatch(h.governor(), kGovernors);
      Add("host.governor",
          absl::StrCat("unknown governor '", h.governor(), "' (expected one of ",
                       absl::StrJoin(kGovernors, ", "), ")",
                       hint.empty() ? "" : absl::StrCat("; did you mean '", hint, "'?")));
    }
    if (!h.thp().empty() && h.thp() != "always" && h.thp() != "madvise" && h.thp() != "never") {
      Add("host.thp",
          absl::StrCat("unknown THP mode '", h.thp(), "' (expected always, madvise or never)"));
    }
    if (h.pin().mode() == crest::v1::PINNING_CPU_LIST) {
      auto cpus = ParseCpuList(h.pin().cpu_list());
      if (!cpus.ok() || cpus->empty()) {
        Add("host.pin", absl::StrCat("'", h.pin().cpu_list(),
                                     "' is not odd-numa, none or a CPU list such as 24-47,72-95"));
      }
    }
  }

  void CheckLimits() {
    const auto& l = spec_.limits();
    if (l.start_timeout().seconds() < 0 || l.benchmark_timeout().seconds() < 0) {
      Add("limits", "timeouts must be positive");
    }
    if (l.max_retries() > 100) Add("limits.max_retries", "must lie in [0, 100]");
  }

  const crest::v1::CampaignSpec& spec_;
  std::vector<SpecProblem> problems_;
};

}  // namespace

std::vector<SpecProblem> ValidateCampaignSpec(const crest::v1::CampaignSpec& spec) {
  // Sizes first: a spec over them (from the wire, megabytes of it) is refused
  // before anything walks it, and never stored.
  if (std::string size_problem = SpecSizeProblem(spec); !size_problem.empty()) {
    std::vector<std::string> parts = absl::StrSplit(size_problem, absl::MaxSplits(": ", 1));
    return {{parts[0], 0, parts.size() > 1 ? parts[1] : ""}};
  }
  return SpecChecker(spec).Check();
}

absl::Status CheckCampaignSpec(const crest::v1::CampaignSpec& spec) {
  auto problems = ValidateCampaignSpec(spec);
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(FormatProblems(problems));
}

}  // namespace crest::controller
