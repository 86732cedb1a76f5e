#include "controller/campaign_io/spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

#include "common/mindie_limits.h"
#include "controller/campaign_io/spec_validator.h"
#include "controller/campaign_io/spec_yaml_walker.h"

namespace crest::controller {
namespace {

using crest::v1::CampaignSpec;
using mindie::kMaxBatchSize;

// The campaign spec's sections, over the walker's typed accessors.
class Walker : public SpecYamlWalker {
 public:
  using SpecYamlWalker::SpecYamlWalker;

  void Models(const YAML::Node& node, CampaignSpec* spec) {
    Remember("models", node);
    if (!node.IsSequence()) {
      Problem("models", node, "expected a list of models (each a map with at least 'name')");
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      std::string path = absl::StrCat("models[", i, "]");
      auto* m = spec->add_models();
      Map(node[i], path,
          {"name", "profile", "model_path", "nodes", "selector", "parallel", "exclusive", "fleet"},
          [&](const std::string& key, const YAML::Node& v, const std::string& p) {
            if (key == "name") {
              String(v, p, m->mutable_name(), "a model name");
            } else if (key == "profile") {
              String(v, p, m->mutable_profile(), "a simulator profile name");
            } else if (key == "model_path") {
              String(v, p, m->mutable_model_path(), "a path");
            } else if (key == "nodes") {
              if (!v.IsSequence()) {
                Problem(p, v, "expected a list of node names");
                return;
              }
              for (size_t j = 0; j < v.size(); ++j) {
                std::string name;
                if (String(v[j], absl::StrCat(p, "[", j, "]"), &name, "a node name")) {
                  m->add_nodes(name);
                }
              }
            } else if (key == "selector") {
              if (!v.IsMap()) {
                Problem(p, v, "expected a map of labels, e.g. {npu: 910B3}");
                return;
              }
              for (const auto& kv : v) {
                std::string label;
                std::string value;
                if (String(kv.first, p, &label, "a label name") &&
                    String(kv.second, absl::StrCat(p, ".", label), &value, "a label value")) {
                  (*m->mutable_selector())[label] = value;
                }
              }
            } else if (key == "parallel") {
              UInt<uint32_t>(
                  v, p, 1, 1024, [m](uint32_t x) { m->set_parallel(x); }, "a slot count");
            } else if (key == "exclusive") {
              bool b = false;
              if (Bool(v, p, &b)) m->set_exclusive(b);
            } else if (key == "fleet") {
              bool b = false;
              if (Bool(v, p, &b)) m->set_fleet(b);
            }
          });
    }
  }

  void Search(const YAML::Node& node, CampaignSpec* spec) {
    auto* s = spec->mutable_search();
    Map(node, "search",
        {"parameter", "range", "initial", "step", "strategy", "repeats", "tolerance", "max_trials",
         "cache_block_size", "neighbour_noise", "prior"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) {
          if (key == "parameter") {
            String(v, p, s->mutable_parameter(), "a ScheduleConfig key");
          } else if (key == "range") {
            if (v.IsScalar() && v.Scalar() == "auto") {
              s->set_range_auto(true);
              return;
            }
            int64_t lo = 0;
            int64_t hi = 0;
            if (!v.IsSequence() || v.size() != 2) {
              Problem(p, v, "expected auto or a list [lo, hi]");
              return;
            }
            bool ok =
                Int(v[0], p + "[0]", kMaxBatchSize.min, kMaxBatchSize.max, &lo, "a maxBatchSize");
            ok =
                Int(v[1], p + "[1]", kMaxBatchSize.min, kMaxBatchSize.max, &hi, "a maxBatchSize") &&
                ok;
            if (!ok) return;
            s->set_range_auto(false);
            s->set_range_lo(lo);
            s->set_range_hi(hi);
          } else if (key == "initial") {
            if (v.IsScalar() && v.Scalar() == "auto") {
              s->set_initial_auto(true);
              return;
            }
            int64_t x = 0;
            if (Int(v, p, kMaxBatchSize.min, kMaxBatchSize.max, &x, "auto or a maxBatchSize")) {
              s->set_initial(x);
              s->set_initial_auto(false);
            }
          } else if (key == "step") {
            int64_t x = 0;
            if (Int(v, p, 1, kMaxBatchSize.max, &x, "a positive step")) s->set_step(x);
          } else if (key == "strategy") {
            String(v, p, s->mutable_strategy(), "a strategy name");
          } else if (key == "prior") {
            String(v, p, s->mutable_prior(), "a campaign id such as c12");
          } else if (key == "repeats") {
            UInt<uint32_t>(
                v, p, 1, 100, [s](uint32_t x) { s->set_repeats(x); }, "a repeat count");
          } else if (key == "tolerance") {
            double x = 0;
            if (Double(v, p, 0, 0.99, &x, "a relative drop such as 0.02")) s->set_tolerance(x);
          } else if (key == "neighbour_noise") {
            double x = 0;
            if (Double(v, p, 0, 0.5, &x, "a relative noise such as 0.01")) {
              s->set_neighbour_noise(x);
            }
          } else if (key == "max_trials") {
            UInt<uint32_t>(
                v, p, 1, 10000, [s](uint32_t x) { s->set_max_trials(x); }, "a trial count");
          } else if (key == "cache_block_size") {
            UInt<uint32_t>(
                v, p, mindie::kCacheBlockSize.min, mindie::kCacheBlockSize.max,
                [s](uint32_t x) { s->set_cache_block_size(x); }, "a token count");
          }
        });
  }

  void Client(const YAML::Node& node, CampaignSpec* spec) {
    auto* c = spec->mutable_client();
    Map(node, "client",
        {"mode", "request_rate", "distribution", "dataset", "max_output_len", "request_count",
         "api", "concurrency", "warmup_requests", "avg_input_tokens", "avg_output_tokens",
         "task_kind"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) {
          if (key == "mode") {
            crest::v1::ClientMode mode{};
            if (Choice<crest::v1::ClientMode>(v, p,
                                              {{"concurrency", crest::v1::CLIENT_MODE_CONCURRENCY},
                                               {"rate", crest::v1::CLIENT_MODE_RATE}},
                                              &mode)) {
              c->set_mode(mode);
            }
          } else if (key == "request_rate") {
            double x = 0;
            if (Double(v, p, 0.001, 1e6, &x, "requests per second")) c->set_request_rate(x);
          } else if (key == "distribution") {
            crest::v1::ArrivalDistribution d{};
            if (Choice<crest::v1::ArrivalDistribution>(
                    v, p,
                    {{"poisson", crest::v1::ARRIVAL_DISTRIBUTION_POISSON},
                     {"constant", crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT}},
                    &d)) {
              c->set_distribution(d);
            }
          } else if (key == "dataset") {
            Dataset(v, p, c->mutable_dataset());
          } else if (key == "max_output_len") {
            UInt<uint32_t>(
                v, p, bench::kMaxOutputLen.min, bench::kMaxOutputLen.max,
                [c](uint32_t x) { c->set_max_output_len(x); }, "a token count");
          } else if (key == "request_count") {
            UInt<uint32_t>(
                v, p, bench::kRequestCount.min, bench::kRequestCount.max,
                [c](uint32_t x) { c->set_request_count(x); }, "a request count");
          } else if (key == "api") {
            crest::v1::BenchmarkApi api{};
            if (Choice<crest::v1::BenchmarkApi>(v, p,
                                                {{"mindie", crest::v1::BENCHMARK_API_MINDIE},
                                                 {"openai", crest::v1::BENCHMARK_API_OPENAI}},
                                                &api)) {
              c->set_api(api);
            }
          } else if (key == "concurrency") {
            UInt<uint32_t>(
                v, p, bench::kConcurrency.min, bench::kConcurrency.max,
                [c](uint32_t x) { c->set_concurrency(x); }, "a client count");
          } else if (key == "warmup_requests") {
            UInt<uint32_t>(
                v, p, bench::kWarmupRequests.min, bench::kWarmupRequests.max,
                [c](uint32_t x) { c->set_warmup_requests(x); }, "a request count");
          } else if (key == "task_kind") {
            crest::v1::TaskKind kind{};
            if (Choice<crest::v1::TaskKind>(
                    v, p,
                    {{"stream", crest::v1::TASK_KIND_STREAM}, {"text", crest::v1::TASK_KIND_TEXT}},
                    &kind)) {
              c->set_task_kind(kind);
            }
          } else if (key == "avg_input_tokens") {
            UInt<uint32_t>(
                v, p, 1, 1 << 20, [c](uint32_t x) { c->set_avg_input_tokens(x); }, "a token count");
          } else if (key == "avg_output_tokens") {
            UInt<uint32_t>(
                v, p, 1, 1 << 20, [c](uint32_t x) { c->set_avg_output_tokens(x); },
                "a token count");
          }
        });
  }

  void Dataset(const YAML::Node& node, const std::string& path, crest::v1::DatasetSpec* d) {
    Map(node, path, {"type", "path", "input_tokens"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) {
          if (key == "type") {
            crest::v1::DatasetType t{};
            if (Choice<crest::v1::DatasetType>(v, p,
                                               {{"gsm8k", crest::v1::DATASET_TYPE_GSM8K},
                                                {"jsonl", crest::v1::DATASET_TYPE_JSONL},
                                                {"synthetic", crest::v1::DATASET_TYPE_SYNTHETIC}},
                                               &t)) {
              d->set_type(t);
            }
          } else if (key == "path") {
            String(v, p, d->mutable_name(), "a dataset name known to the agents");
          } else if (key == "input_tokens") {
            UInt<uint32_t>(
                v, p, 1, 1 << 20, [d](uint32_t x) { d->set_synthetic_input_tokens(x); },
                "a token count");
          }
        });
  }

  void Host(const YAML::Node& node, CampaignSpec* spec) {
    auto* h = spec->mutable_host();
    Map(node, "host", {"governor", "thp", "pin"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) {
          if (key == "governor") {
            String(v, p, h->mutable_governor(), "a cpufreq governor such as performance");
          } else if (key == "thp") {
            String(v, p, h->mutable_thp(), "always, madvise or never");
          } else if (key == "pin") {
            std::string s;
            if (!String(v, p, &s, "odd-numa, none or a CPU list such as 24-47,72-95")) return;
            if (s == "odd-numa") {
              h->mutable_pin()->set_mode(crest::v1::PINNING_ODD_NUMA);
            } else if (s == "none") {
              h->mutable_pin()->set_mode(crest::v1::PINNING_NONE);
            } else {
              h->mutable_pin()->set_mode(crest::v1::PINNING_CPU_LIST);
              h->mutable_pin()->set_cpu_list(s);
            }
          }
        });
  }

  // `rate_search: {}` searches with every default.
  void RateSearch(const YAML::Node& node, CampaignSpec* spec) {
    auto* r = spec->mutable_rate_search();
    Map(node, "rate_search", {"start", "factor", "max_runs", "concurrency"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) {
          double x = 0;
          if (key == "start") {
            if (v.IsScalar() && v.Scalar() == "auto") return;
            if (Double(v, p, 0.001, 1e6, &x, "auto or requests per second")) r->set_start(x);
          } else if (key == "factor") {
            if (Double(v, p, 1.01, 4, &x,
                       "the ratio of one rate to the one before, such as 1.25")) {
              r->set_factor(x);
            }
          } else if (key == "max_runs") {
            UInt<uint32_t>(
                v, p, 2, 50, [r](uint32_t n) { r->set_max_runs(n); }, "a run count");
          } else if (key == "concurrency") {
            UInt<uint32_t>(
                v, p, bench::kConcurrency.min, bench::kConcurrency.max,
                [r](uint32_t n) { r->set_concurrency(n); }, "a client count");
          }
        });
  }

  void Limits(const YAML::Node& node, CampaignSpec* spec) {
    auto* l = spec->mutable_limits();
    Map(node, "limits", {"start_timeout", "benchmark_timeout", "max_retries"},
        [&](const std::string& key, const YAML::Node& v, const std::string& p) {
          if (key == "start_timeout") {
            Duration(v, p, l->mutable_start_timeout());
          } else if (key == "benchmark_timeout") {
            Duration(v, p, l->mutable_benchmark_timeout());
          } else if (key == "max_retries") {
            UInt<uint32_t>(
                v, p, 1, 100, [l](uint32_t x) { l->set_max_retries(x); }, "a retry count");
          }
        });
  }
};

}  // namespace

ParsedSpec ParseCampaignSpec(const std::string& yaml_text) {
  ParsedSpec out;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    out.problems.push_back(
        {"", e.mark.line >= 0 ? e.mark.line + 1 : 0, absl::StrCat("not valid YAML: ", e.msg)});
    return out;
  }
  if (!root.IsDefined() || root.IsNull()) {
    out.problems.push_back({"", 0, "the spec is empty (expected a map with name and models)"});
    return out;
  }
  Walker w(&out);
  try {
    w.Map(root, "",
          {"name", "models", "search", "client", "host", "calibrate", "limits", "rate_search"},
          [&](const std::string& key, const YAML::Node& v, const std::string& p) {
            if (key == "name") {
              w.String(v, p, out.spec.mutable_name(), "a campaign name");
            } else if (key == "models") {
              w.Models(v, &out.spec);
            } else if (key == "search") {
              w.Search(v, &out.spec);
            } else if (key == "client") {
              w.Client(v, &out.spec);
            } else if (key == "host") {
              w.Host(v, &out.spec);
            } else if (key == "calibrate") {
              bool b = false;
              if (w.Bool(v, p, &b)) out.spec.set_calibrate(b);
            } else if (key == "limits") {
              w.Limits(v, &out.spec);
            } else if (key == "rate_search") {
              w.RateSearch(v, &out.spec);
            }
          });
  } catch (const YAML::Exception& e) {
    out.problems.push_back({"", e.mark.line + 1, absl::StrCat("YAML error: ", e.msg)});
  }
  return out;
}

ParsedSpec ParseAndValidateCampaignSpec(const std::string& yaml_text) {
  ParsedSpec parsed = ParseCampaignSpec(yaml_text);
  ApplySpecDefaults(&parsed.spec);
  for (auto& problem : ValidateCampaignSpec(parsed.spec)) {
    // Structural problems at the same path already say what is wrong.
    bool duplicate = std::any_of(parsed.problems.begin(), parsed.problems.end(),
                                 [&](const SpecProblem& p) { return p.path == problem.path; });
    if (duplicate) continue;
    // Name the line of the key, or of its closest known parent.
    std::string path = problem.path;
    while (problem.line == 0 && !path.empty()) {
      auto it = parsed.lines.find(path);
      if (it != parsed.lines.end()) {
        problem.line = it->second;
        break;
      }
      auto cut = path.find_last_of(".[");
      path = cut == std::string::npos ? "" : path.substr(0, cut);
    }
    parsed.problems.push_back(std::move(problem));
  }
  std::stable_sort(parsed.problems.begin(), parsed.problems.end(),
                   [](const SpecProblem& a, const SpecProblem& b) {
                     // Problems without a line (missing keys) go last.
                     int la = a.line == 0 ? std::numeric_limits<int>::max() : a.line;
                     int lb = b.line == 0 ? std::numeric_limits<int>::max() : b.line;
                     return la < lb;
                   });
  return parsed;
}

}  // namespace crest::controller
