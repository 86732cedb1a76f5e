// crest-bench's command line: MindIE benchmark-compatible flags (--Concurrency,
// --DatasetPath, ...) with lower-case aliases (--concurrency, ...), bound to a
// CLI11 app, and their translation into RunOptions once parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

#include "loadgen/run_types.h"

namespace crest::loadgen {

// Everything one crest-bench invocation asks for.
struct Invocation {
  RunOptions run;
  std::string json_file;
  std::string csv_file;
  std::string mindie_benchmark;   // path of the real MindIE `benchmark` (adapter mode)
  std::string aisbench;           // path of `ais_bench` (AISBench adapter mode)
  std::string aisbench_models;    // its --models config
  std::string aisbench_datasets;  // its --datasets config
  std::string aisbench_work_dir;  // its --work-dir
  std::string save_path;          // adapter mode: --SavePath handed to the tool
  std::string model_path;         // adapter mode: --ModelPath (the tool's tokenizer)
  std::string log_level;
};

// The flags' raw values (strings where MindIE spells booleans True/False).
class BenchFlags {
 public:
  // Registers every flag on `app`; the object must outlive parsing.
  explicit BenchFlags(CLI::App& app);

  // Validates the parsed values and builds the invocation (dataset resolved).
  // Errors say which flag and what was expected.
  absl::StatusOr<Invocation> Resolve() const;

 private:
  std::string dataset_path_;
  std::string dataset_type_ = "gsm8k";
  uint32_t synthetic_input_len_ = 0;
  std::string model_name_;
  std::string model_path_;
  std::string test_type_ = "client";
  std::string http_ = "https://127.0.0.1:1025";  // MindIE's default
  std::string management_http_;
  uint32_t concurrency_ = 128;  // MindIE's default
  std::string request_rate_;
  std::string distribution_ = "poisson";
  uint32_t request_count_ = 0;
  double duration_s_ = 0;
  std::string task_kind_ = "stream";
  uint32_t max_output_len_ = 20;  // MindIE's default
  uint32_t max_input_len_ = 0;
  uint32_t warmup_ = 0;
  double request_timeout_s_ = 600;
  std::string tokenizer_ = "True";
  std::string api_ = "mindie";
  std::string json_;
  std::string csv_;
  uint64_t seed_ = 0;
  std::string ca_file_;
  bool insecure_skip_verify_ = false;
  std::string client_cert_;
  std::string client_key_;
  std::string cpus_;
  std::string http_client_ = "auto";
  std::string mindie_benchmark_;
  std::string aisbench_;
  std::string aisbench_models_ = "vllm_api_stream_chat";
  std::string aisbench_datasets_ = "gsm8k_gen_0_shot_cot_str_perf";
  std::string aisbench_work_dir_ = "outputs/crest";
  std::string save_path_ = "./instance";
  std::string log_level_ = "warn";
};

}  // namespace crest::loadgen
