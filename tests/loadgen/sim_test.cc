// crest-bench against mindie-sim (issue 4), the component it will measure in
// practice. Fails, saying why, when $CREST_BIN_DIR/mindie-sim is missing or does not serve.
#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/test_paths.h"
#include "loadgen/runner.h"
#include "loadgen/testing/sse_test_server.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::SourceDir;

// A mindie-sim child process, stopped with SIGTERM when the object dies.
class SimProcess {
 public:
  explicit SimProcess(std::vector<std::string> argv) {
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~SimProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  SimProcess(const SimProcess&) = delete;
  SimProcess& operator=(const SimProcess&) = delete;
  bool Exited() const {
    int status = 0;
    return pid_ <= 0 || waitpid(pid_, &status, WNOHANG) == pid_;
  }

 private:
  pid_t pid_ = -1;
};

long HttpGet(const std::string& url) {  // NOLINT(google-runtime-int)
  CURL* easy = curl_easy_init();
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 1000L);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(
      easy, CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t n, void*) { return size * n; });
  long status = 0;  // NOLINT(google-runtime-int)
  if (curl_easy_perform(easy) == CURLE_OK) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(easy);
  return status;
}

TEST(MindieSimTest, StreamsGsm8kThroughBothApis) {
  const std::string src = SourceDir();
  const std::string sim = ::crest::testing::BinDir() + "/mindie-sim";
  ASSERT_EQ(access(sim.c_str(), X_OK), 0) << sim << " is not built";
  absl::StatusOr<std::string> conf = ReadFileToString(src + "/sim/conf/config.json");
  ASSERT_TRUE(conf.ok()) << "sim/conf/config.json missing: " << conf.status();
  nlohmann::json config = nlohmann::json::parse(*conf, nullptr, false);
  ASSERT_TRUE(config.is_object()) << "sim/conf/config.json is not JSON";
  std::vector<uint16_t> ports;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<uint16_t> p = testing::ClosedPort();
    ASSERT_THAT(p, IsOk());
    ports.push_back(*p);
  }
  auto& server = config["ServerConfig"];
  server["ipAddress"] = "127.0.0.1";
  server["managementIpAddress"] = "127.0.0.1";
  server["port"] = ports[0];
  server["managementPort"] = ports[1];
  server["metricsPort"] = ports[2];
  server["httpsEnabled"] = false;
  crest::testing::TempDir dir;
  ASSERT_THAT(WriteFileAtomically(dir.File("config.json"), config.dump(2)), IsOk());

  SimProcess process(
      {sim, "--config", dir.File("config.json"), "--time-scale", "200", "--seed", "1"});
  const std::string business = "http://127.0.0.1:" + std::to_string(ports[0]);
  const std::string management = "http://127.0.0.1:" + std::to_string(ports[1]);
  // Polling is the only way to learn readiness from outside; bounded by a deadline.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (HttpGet(management + "/v2/health/ready") != 200) {
    if (process.Exited() || absl::Now() > deadline) {
      FAIL() << "mindie-sim does not serve (no 200 from /v2/health/ready)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto api : {crest::v1::BENCHMARK_API_MINDIE, crest::v1::BENCHMARK_API_OPENAI}) {
    RunOptions o;
    o.target.base_url = business;
    o.target.management_url = management;
    o.spec.set_api(api);
    o.spec.set_concurrency(8);
    o.spec.set_request_count(16);
    o.spec.set_max_output_len(32);
    o.dataset_path = src + "/data/gsm8k/test.jsonl";
    absl::StatusOr<RunOutput> out = RunBenchmark(o, nullptr, nullptr);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->result.succeeded(), 16U) << out->result.ShortDebugString();
    EXPECT_EQ(out->result.failed(), 0U) << out->result.ShortDebugString();
    EXPECT_GT(out->result.output_tokens(), 0U);
    EXPECT_LE(out->result.output_tokens(), 16U * 32U);
    EXPECT_GT(out->result.generate_speed(), 0);
    EXPECT_EQ(out->result.token_count_source(), crest::v1::TOKEN_COUNT_SOURCE_USAGE_FIELDS);
    for (const RequestRecord& r : out->requests) {
      EXPECT_FALSE(r.token_count_mismatch) << "request " << r.index;
    }
  }
}

}  // namespace
}  // namespace crest::loadgen
