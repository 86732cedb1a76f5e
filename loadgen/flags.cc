#include "loadgen/flags.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

#include "common/cpu_list.h"
#include "common/mindie_limits.h"
#include "common/status.h"
#include "loadgen/dataset.h"

namespace crest::loadgen {
namespace {

using google::protobuf::util::TimeUtil;

const std::vector<std::string> kBooleans = {"True", "False", "true", "false"};

}  // namespace

BenchFlags::BenchFlags(CLI::App& app) {
  const char* const mindie_group = "MindIE benchmark flags";
  app.add_option("--DatasetPath,--dataset-path", dataset_path_,
                 "Dataset directory holding test.jsonl, or the file itself "
                 "(default: the shipped GSM8K)")
      ->group(mindie_group);
  app.add_option("--DatasetType,--dataset-type", dataset_type_, "gsm8k | jsonl | synthetic")
      ->check(CLI::IsMember({"gsm8k", "jsonl", "synthetic"}, CLI::ignore_case))
      ->group(mindie_group);
  app.add_option("--SyntheticInputLen,--synthetic-input-len", synthetic_input_len_,
                 "Synthetic prompts: input length in tokens")
      ->check(CLI::Range(int64_t{0}, bench::kSyntheticInputTokens.max))
      ->group(mindie_group);
  app.add_option("--ModelName,--model-name", model_name_, "Model name sent with each request")
      ->group(mindie_group);
  app.add_option("--ModelPath,--model-path", model_path_,
                 "Model directory (accepted for compatibility; tokens come from the server)")
      ->group(mindie_group);
  app.add_option("--TestType,--test-type", test_type_, "client (MindIE native) | openai")
      ->check(CLI::IsMember({"client", "openai"}))
      ->group(mindie_group);
  app.add_option("--Http,--http", http_, "Business endpoint URL")->group(mindie_group);
  app.add_option("--ManagementHttp,--management-http", management_http_,
                 "Management endpoint URL; when given, /v2/health/ready must answer 200 first")
      ->group(mindie_group);
  app.add_option("--Concurrency,--concurrency", concurrency_, "Requests in flight at most")
      ->check(CLI::Range(bench::kConcurrency.min, bench::kConcurrency.max))
      ->group(mindie_group);
  app.add_option("--RequestRate,--request-rate", request_rate_,
                 "Requests per second (0 or unset: concurrency mode)")
      ->group(mindie_group);
  app.add_option("--Distribution,--distribution", distribution_,
                 "Arrivals in rate mode: poisson | uniform (evenly spaced) | constant")
      ->check(CLI::IsMember({"poisson", "uniform", "constant"}, CLI::ignore_case))
      ->group(mindie_group);
  app.add_option("--RequestCount,--request-count", request_count_,
                 "Measured requests (0: the whole dataset once)")
      ->check(CLI::Range(int64_t{0}, bench::kRequestCount.max))
      ->group(mindie_group);
  app.add_option("--Duration,--duration", duration_s_,
                 "Stop sending new requests after this many seconds (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->group(mindie_group);
  app.add_option("--TaskKind,--task-kind", task_kind_, "stream | text")
      ->check(CLI::IsMember({"stream", "text", "stream_token"}))
      ->group(mindie_group);
  app.add_option("--MaxOutputLen,--max-output-len", max_output_len_,
                 "Cap on generated tokens per request")
      ->check(CLI::Range(bench::kMaxOutputLen.min, bench::kMaxOutputLen.max))
      ->group(mindie_group);
  app.add_option("--MaxInputLen,--max-input-len", max_input_len_,
                 "Accepted for compatibility (prompts are sent whole)")
      ->group(mindie_group);
  app.add_option("--WarmupRequests,--warmup-requests,--WarmupSize,--warmup-size", warmup_,
                 "Requests sent and discarded before measuring (default 0)")
      ->check(CLI::Range(bench::kWarmupRequests.min, bench::kWarmupRequests.max))
      ->group(mindie_group);
  app.add_option("--RequestTimeOut,--request-timeout", request_timeout_s_,
                 "Seconds before an unfinished request fails with reason timeout")
      ->check(CLI::PositiveNumber)
      ->group(mindie_group);
  app.add_option("--Tokenizer,--tokenizer", tokenizer_, "True | False (accepted)")
      ->check(CLI::IsMember(kBooleans))
      ->group(mindie_group);
  app.add_option("--SavePath,--save-path", save_path_,
                 "Adapter mode: where the MindIE tool writes its files")
      ->group(mindie_group);
  app.add_option("--api", api_, "Wire format: mindie (POST /infer) | openai (POST /v1/completions)")
      ->check(CLI::IsMember({"mindie", "openai"}));
  app.add_option("--json", json_, "Write every metric and the run's parameters to this file");
  app.add_option("--csv", csv_, "Write one record per request to this file");
  app.add_option("--seed", seed_, "Seed for prompt order and arrival gaps (0: dataset order)");
  app.add_option("--ca-file", ca_file_, "https: CA bundle to verify the server with")
      ->check(CLI::ExistingFile);
  app.add_flag("--insecure-skip-verify", insecure_skip_verify_,
               "https: do not verify the server's certificate");
  app.add_option("--client-cert", client_cert_, "https: client certificate (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--client-key", client_key_, "https: key of --client-cert (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--cpus", cpus_, "Pin the load generator to these CPUs (lscpu list: 0-3,8)");
  app.add_option("--http-client", http_client_,
                 "auto (crest-bench's own HTTP/1.1 client for http://, libcurl for https://) | "
                 "libcurl (for both)")
      ->check(CLI::IsMember({"auto", "libcurl"}));
  app.add_option("--use-mindie-benchmark", mindie_benchmark_,
                 "Run this MindIE `benchmark` binary with the same parameters instead, and "
                 "parse its printed results");
  app.add_option("--use-aisbench", aisbench_,
                 "Run this AISBench `ais_bench` in perf mode against the same server instead "
                 "(its API-model overrides carry host, port, model, concurrency, output length, "
                 "rate and request count), and read its result files")
      ->excludes("--use-mindie-benchmark");
  app.add_option("--aisbench-models", aisbench_models_,
                 "AISBench model config (ais_bench --models; `ais_bench --search` lists them)");
  app.add_option("--aisbench-datasets", aisbench_datasets_,
                 "AISBench dataset config (ais_bench --datasets), e.g. "
                 "gsm8k_gen_0_shot_cot_str_perf or synthetic_gen");
  app.add_option("--aisbench-work-dir", aisbench_work_dir_, "AISBench --work-dir");
  app.add_option("--log-level", log_level_, "trace | debug | info | warn | error");
}

absl::StatusOr<Invocation> BenchFlags::Resolve() const {
  Invocation inv;
  crest::v1::BenchmarkSpec& spec = inv.run.spec;
  std::string api = api_;
  if (test_type_ == "openai") api = "openai";
  spec.set_api(api == "openai" ? crest::v1::BENCHMARK_API_OPENAI : crest::v1::BENCHMARK_API_MINDIE);
  spec.set_task_kind(task_kind_ == "text" ? crest::v1::TASK_KIND_TEXT
                                          : crest::v1::TASK_KIND_STREAM);
  std::string type = dataset_type_;
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  crest::v1::DatasetSpec& dataset = *spec.mutable_dataset();
  if (type == "synthetic") {
    dataset.set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
    if (synthetic_input_len_ == 0) {
      return absl::InvalidArgumentError(
          "--DatasetType synthetic needs --SyntheticInputLen N (tokens per prompt, N >= 1)");
    }
    dataset.set_synthetic_input_tokens(synthetic_input_len_);
    if (request_count_ == 0 && duration_s_ == 0) {
      return absl::InvalidArgumentError(
          "--DatasetType synthetic needs --RequestCount N or --Duration S");
    }
  } else {
    dataset.set_type(type == "jsonl" ? crest::v1::DATASET_TYPE_JSONL
                                     : crest::v1::DATASET_TYPE_GSM8K);
    std::string path = dataset_path_;
    if (path.empty()) {
      if (type == "jsonl") {
        return absl::InvalidArgumentError("--DatasetType jsonl needs --DatasetPath FILE");
      }
      CREST_ASSIGN_OR_RETURN(path, DefaultDatasetDir());
    }
    absl::StatusOr<std::string> resolved = ResolveDatasetPath(path);
    if (!resolved.ok()) return Annotate(resolved.status(), "--DatasetPath");
    inv.run.dataset_path = *resolved;
  }
  spec.set_model_name(model_name_);
  spec.set_concurrency(concurrency_);
  if (!request_rate_.empty()) {
    double rate = 0;
    if (!absl::SimpleAtod(request_rate_, &rate) || !(rate >= 0) || rate > bench::kMaxRequestRate) {
      return absl::InvalidArgumentError(
          absl::StrCat("--RequestRate \"", request_rate_, "\": expected one number in [0, ",
                       static_cast<int64_t>(bench::kMaxRequestRate),
                       "] (run crest-bench once per rate for several)"));
    }
    spec.set_request_rate(rate);
  }
  spec.set_distribution(distribution_ == "poisson" || distribution_ == "Poisson"
                            ? crest::v1::ARRIVAL_DISTRIBUTION_POISSON
                            : crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  spec.set_request_count(request_count_);
  if (duration_s_ > 0) {
    *spec.mutable_max_duration() =
        TimeUtil::NanosecondsToDuration(static_cast<int64_t>(duration_s_ * 1e9));
  }
  spec.set_max_output_len(max_output_len_);
  spec.set_warmup_requests(warmup_);
  *spec.mutable_request_timeout() =
      TimeUtil::NanosecondsToDuration(static_cast<int64_t>(request_timeout_s_ * 1e9));
  spec.set_seed(seed_);

  Target& target = inv.run.target;
  target.base_url = http_;
  if (http_.rfind("http://", 0) != 0 && http_.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--Http \"", http_, "\": expected an http:// or https:// URL"));
  }
  target.management_url = management_http_;
  if (!management_http_.empty() && management_http_.rfind("http://", 0) != 0 &&
      management_http_.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--ManagementHttp \"", management_http_,
                                                   "\": expected an http:// or https:// URL"));
  }
  target.ca_file = ca_file_;
  target.insecure_skip_verify = insecure_skip_verify_;
  target.client_cert_file = client_cert_;
  target.client_key_file = client_key_;
  if (client_cert_.empty() != client_key_.empty()) {
    return absl::InvalidArgumentError("--client-cert and --client-key go together");
  }
  if (!cpus_.empty()) {
    absl::StatusOr<std::vector<uint32_t>> cpus = ParseCpuList(cpus_);
    if (!cpus.ok()) return Annotate(cpus.status(), "--cpus");
    inv.run.cpus = *cpus;
  }
  inv.run.http_client = http_client_ == "libcurl" ? HttpClient::kLibcurl : HttpClient::kAuto;
  inv.json_file = json_;
  inv.csv_file = csv_;
  inv.mindie_benchmark = mindie_benchmark_;
  inv.aisbench = aisbench_;
  inv.aisbench_models = aisbench_models_;
  inv.aisbench_datasets = aisbench_datasets_;
  inv.aisbench_work_dir = aisbench_work_dir_;
  inv.save_path = save_path_;
  inv.model_path = model_path_;
  inv.log_level = log_level_;
  return inv;
}

}  // namespace crest::loadgen
