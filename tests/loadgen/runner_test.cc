// crest_loadgen's RunBenchmark against the in-process paced SSE server: the
// figures match the server's own record of what it sent and when, and every
// fault mode ends as a counted failure with its reason (nothing hangs).
#include "loadgen/runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/test_paths.h"
#include "loadgen/dataset.h"
#include "loadgen/testing/sse_test_server.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::SourceDir;
using ::crest::testing::StatusIs;
using ::google::protobuf::util::TimeUtil;
using testing::Fault;
using ::testing::HasSubstr;
using testing::SseServerOptions;
using testing::SseTestServer;

constexpr absl::Duration kTestDeadline = absl::Seconds(15);

RunOptions Synthetic(const std::string& url, uint32_t concurrency, uint32_t count) {
  RunOptions o;
  o.target.base_url = url;
  o.spec.set_concurrency(concurrency);
  o.spec.set_request_count(count);
  o.spec.set_max_output_len(20);
  o.spec.mutable_dataset()->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
  o.spec.mutable_dataset()->set_synthetic_input_tokens(16);
  return o;
}

// Runs with a deadline: a hang cancels the run and fails the test.
absl::StatusOr<RunOutput> RunWithDeadline(const RunOptions& options) {
  std::atomic<bool> cancel{false};
  auto future =
      std::async(std::launch::async, [&] { return RunBenchmark(options, nullptr, &cancel); });
  if (future.wait_for(absl::ToChronoSeconds(kTestDeadline)) != std::future_status::ready) {
    ADD_FAILURE() << "RunBenchmark did not finish within " << kTestDeadline;
    cancel = true;
  }
  return future.get();
}

std::unique_ptr<SseTestServer> StartServer(const SseServerOptions& options) {
  auto server = SseTestServer::Start(options);
  EXPECT_THAT(server, IsOk());
  return server.ok() ? std::move(*server) : nullptr;
}

// A server answering at once: first token after 1 ms, then one token per ms.
std::unique_ptr<SseTestServer> StartFastServer(uint32_t tokens) {
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(1);
  so.token_interval = absl::Milliseconds(1);
  so.tokens = tokens;
  return StartServer(so);
}

double Ratio(double measured, double truth) { return truth == 0 ? 0 : measured / truth; }

const char* ClientName(HttpClient c) { return c == HttpClient::kLibcurl ? "libcurl" : "own"; }

class PacedAccuracyTest
    : public ::testing::TestWithParam<std::tuple<crest::v1::BenchmarkApi, HttpClient>> {
 protected:
  crest::v1::BenchmarkApi Api() const { return std::get<0>(GetParam()); }
};

TEST_P(PacedAccuracyTest, GenerateSpeedAndFirstTokenTimeWithinTwoPercentOfServerTruth) {
  SseServerOptions so;
  // A long first-token delay keeps the 2% band wide against scheduling noise
  // on a loaded machine (2% of 200 ms = 4 ms).
  so.first_token_delay = absl::Milliseconds(200);
  so.token_interval = absl::Milliseconds(10);
  so.tokens = 20;
  so.stamp_arrival = true;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 4, 12);
  o.spec.set_api(Api());
  o.spec.set_model_name("m1");
  o.http_client = std::get<1>(GetParam());
  // Warm-up opens the four keep-alive connections, so the measured requests
  // compare like with like (the server cannot see connection set-up).
  o.spec.set_warmup_requests(4);
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  const crest::v1::BenchmarkResult& r = out->result;

  // The server records a reply just after its last byte; wait for all 16.
  ASSERT_TRUE(server->WaitForServed(16, kTestDeadline));
  std::vector<testing::ServedRequest> served = server->Served();
  ASSERT_EQ(served.size(), 16U);
  std::sort(served.begin(), served.end(),
            [](const auto& a, const auto& b) { return a.arrived < b.arrived; });
  served.erase(served.begin(), served.begin() + 4);  // the warm-up requests
  absl::Time first = absl::InfiniteFuture();
  absl::Time last = absl::InfinitePast();
  uint64_t tokens = 0;
  double ttft_sum = 0;
  for (const auto& s : served) {
    EXPECT_TRUE(s.completed);
    EXPECT_TRUE(s.stream);
    EXPECT_EQ(s.max_tokens, 20U);
    EXPECT_EQ(s.path, Api() == crest::v1::BENCHMARK_API_OPENAI ? "/v1/completions" : "/infer");
    if (Api() == crest::v1::BENCHMARK_API_OPENAI) {
      EXPECT_EQ(s.model, "m1");
    }
    first = std::min(first, s.arrived);
    last = std::max(last, s.last_byte_sent);
    tokens += s.tokens_sent;
    ttft_sum += absl::ToDoubleMilliseconds(s.first_token_sent - s.arrived);
  }
  const double true_speed = static_cast<double>(tokens) / absl::ToDoubleSeconds(last - first);
  const double true_ttft = ttft_sum / static_cast<double>(served.size());

  EXPECT_EQ(r.succeeded(), 12U);
  EXPECT_EQ(r.failed(), 0U);
  EXPECT_EQ(r.output_tokens(), tokens);
  EXPECT_EQ(r.input_tokens(), 12U * 7U);
  EXPECT_EQ(r.token_count_source(), crest::v1::TOKEN_COUNT_SOURCE_USAGE_FIELDS);
  EXPECT_EQ(r.concurrency(), 4U);
  EXPECT_NEAR(Ratio(r.generate_speed(), true_speed), 1.0, 0.02)
      << r.generate_speed() << " vs " << true_speed;
  EXPECT_NEAR(Ratio(r.first_token_time().average_ms(), true_ttft), 1.0, 0.02)
      << r.first_token_time().average_ms() << " vs " << true_ttft;
  EXPECT_DOUBLE_EQ(r.generate_speed_per_client(), r.generate_speed() / 4);
  EXPECT_EQ(r.first_token_time().samples(), 12U);
  EXPECT_EQ(r.decode_time().samples(), 12U * 19U);  // one gap per token after the first
  EXPECT_EQ(r.e2e_latency().samples(), 12U);
  EXPECT_GE(r.e2e_latency().max_ms(), r.e2e_latency().p99_ms());
  EXPECT_GE(r.e2e_latency().p50_ms(), r.first_token_time().p50_ms());
  ASSERT_EQ(out->requests.size(), 12U);
  for (const RequestRecord& rec : out->requests) {
    EXPECT_TRUE(rec.ok);
    EXPECT_EQ(rec.output_tokens, 20U);
    EXPECT_EQ(rec.token_events, 20U);
    EXPECT_FALSE(rec.token_count_mismatch);
    EXPECT_EQ(rec.http_status, 200);
  }
}

INSTANTIATE_TEST_SUITE_P(
    BothApisBothClients, PacedAccuracyTest,
    ::testing::Combine(::testing::Values(crest::v1::BENCHMARK_API_MINDIE,
                                         crest::v1::BENCHMARK_API_OPENAI),
                       ::testing::Values(HttpClient::kAuto, HttpClient::kLibcurl)),
    [](const auto& info) {
      return absl::StrCat(
          std::get<0>(info.param) == crest::v1::BENCHMARK_API_OPENAI ? "openai" : "mindie", "_",
          ClientName(std::get<1>(info.param)));
    });

TEST(RunnerTest, PackedEventsAreAllCounted) {
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(1);
  so.token_interval = absl::Milliseconds(1);
  so.tokens = 40;
  so.events_per_write = 7;  // chunks carry several events; the last chunk a partial group
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<RunOutput> out = RunWithDeadline(Synthetic(server->url(), 3, 6));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 6U);
  for (const RequestRecord& rec : out->requests) EXPECT_EQ(rec.token_events, 40U);
}

struct FaultCase {
  const char* name;
  Fault fault;
  int http_status;
  const char* reason;
};

class FaultTest : public ::testing::TestWithParam<std::tuple<FaultCase, HttpClient>> {
 protected:
  const FaultCase& Case() const { return std::get<0>(GetParam()); }
};

TEST_P(FaultTest, EveryRequestFailsWithItsReasonAndTheRunFinishes) {
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(5);
  so.token_interval = absl::Milliseconds(2);
  so.tokens = 10;
  so.fault = Case().fault;
  so.http_status = Case().http_status;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 2, 4);
  o.http_client = std::get<1>(GetParam());
  *o.spec.mutable_request_timeout() = TimeUtil::MillisecondsToDuration(400);
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  const crest::v1::BenchmarkResult& r = out->result;
  EXPECT_EQ(r.succeeded(), 0U);
  EXPECT_EQ(r.failed(), 4U);
  EXPECT_EQ(r.failures().size(), 1U);
  EXPECT_EQ(r.failures().count(Case().reason), 1U) << "reasons: " << r.ShortDebugString();
  EXPECT_EQ(r.output_tokens(), 0U);
  ASSERT_EQ(out->requests.size(), 4U);
  for (const RequestRecord& rec : out->requests) {
    EXPECT_FALSE(rec.ok);
    EXPECT_EQ(rec.failure, Case().reason);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, FaultTest,
    ::testing::Combine(::testing::Values(FaultCase{"http503", Fault::kHttpError, 503, "http_503"},
                                         FaultCase{"http500", Fault::kHttpError, 500, "http_500"},
                                         FaultCase{"reset", Fault::kResetMidStream, 0, "reset"},
                                         FaultCase{"malformed", Fault::kMalformedSse, 0,
                                                   "malformed_sse"},
                                         FaultCase{"stall", Fault::kStall, 0, "timeout"},
                                         FaultCase{"truncated", Fault::kTruncate, 0, "truncated"}),
                       ::testing::Values(HttpClient::kAuto, HttpClient::kLibcurl)),
    [](const auto& info) {
      return absl::StrCat(std::get<0>(info.param).name, "_", ClientName(std::get<1>(info.param)));
    });

TEST(RunnerTest, RefusedConnectionsAreCountedAsConnectFailures) {
  absl::StatusOr<uint16_t> port = testing::ClosedPort();
  ASSERT_THAT(port, IsOk());
  absl::StatusOr<RunOutput> out =
      RunWithDeadline(Synthetic("http://127.0.0.1:" + std::to_string(*port), 3, 5));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.failed(), 5U);
  EXPECT_EQ(out->result.failures().at("connect"), 5U);
  EXPECT_EQ(out->result.succeeded(), 0U);
}

TEST(RunnerTest, UsageCountWinsOverStreamEventsAndTheMismatchIsNoted) {
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(1);
  so.token_interval = absl::Milliseconds(1);
  so.tokens = 5;
  so.fault = Fault::kUsageMismatch;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<RunOutput> out = RunWithDeadline(Synthetic(server->url(), 2, 2));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.output_tokens(), 12U);  // usage says 6 each, the stream carried 5
  EXPECT_EQ(out->result.token_count_source(), crest::v1::TOKEN_COUNT_SOURCE_USAGE_FIELDS);
  for (const RequestRecord& rec : out->requests) {
    EXPECT_TRUE(rec.token_count_mismatch);
    EXPECT_EQ(rec.token_events, 5U);
  }
}

TEST(RunnerTest, TextModeTakesTokensFromTheBody) {
  SseServerOptions so;
  so.tokens = 9;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  for (auto api : {crest::v1::BENCHMARK_API_MINDIE, crest::v1::BENCHMARK_API_OPENAI}) {
    RunOptions o = Synthetic(server->url(), 2, 4);
    o.spec.set_api(api);
    o.spec.set_task_kind(crest::v1::TASK_KIND_TEXT);
    absl::StatusOr<RunOutput> out = RunWithDeadline(o);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->result.succeeded(), 4U);
    EXPECT_EQ(out->result.output_tokens(), 36U);
    EXPECT_EQ(out->result.input_tokens(), 28U);
    for (const RequestRecord& rec : out->requests) EXPECT_EQ(rec.first_token_ms, rec.e2e_ms);
  }
  for (const auto& s : server->Served()) EXPECT_FALSE(s.stream);
}

TEST(RunnerTest, WarmupRequestsAreSentButNotMeasured) {
  auto server = StartFastServer(3);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 2, 5);
  o.spec.set_warmup_requests(3);
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  // received() is counted before the reply starts, so it is final once the run returns;
  // requests() is only final after the server has recorded the last reply.
  EXPECT_EQ(server->received(), 8U);
  EXPECT_LE(server->connections(), 2U);  // keep-alive: one connection per client slot
  EXPECT_EQ(out->requests.size(), 5U);
  EXPECT_EQ(out->result.succeeded(), 5U);
  EXPECT_EQ(out->result.output_tokens(), 15U);
}

TEST(RunnerTest, ConstantRateModeSendsRateTimesDurationRequests) {
  auto server = StartFastServer(2);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 1000, 0);
  o.spec.set_request_rate(20);
  o.spec.set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  *o.spec.mutable_max_duration() = TimeUtil::MillisecondsToDuration(1000);
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  // Arrivals at 0, 50, ..., 950 ms fall inside the 1 s window.
  EXPECT_EQ(out->requests.size(), 20U);
  EXPECT_EQ(server->received(), 20U);
  EXPECT_EQ(out->result.concurrency(), 1000U);
}

TEST(RunnerTest, PoissonScheduleIsReproducibleForASeed) {
  auto server = StartFastServer(2);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 1000, 15);
  o.spec.set_request_rate(200);
  o.spec.set_seed(42);
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 15U);
}

TEST(RunnerTest, GsmDatasetPromptsAreSentInOrder) {
  auto server = StartFastServer(2);
  ASSERT_NE(server, nullptr);
  RunOptions o;
  o.target.base_url = server->url();
  o.spec.set_concurrency(1);
  o.spec.set_request_count(2);
  o.spec.set_max_output_len(4);
  absl::StatusOr<std::string> path = ResolveDatasetPath(SourceDir() + "/data/gsm8k");
  ASSERT_THAT(path, IsOk());
  o.dataset_path = *path;
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  ASSERT_TRUE(server->WaitForServed(2, kTestDeadline));
  std::vector<testing::ServedRequest> served = server->Served();
  ASSERT_EQ(served.size(), 2U);
  EXPECT_THAT(served[0].prompt, HasSubstr("Janet"));
}

TEST(RunnerTest, HttpsWithCaFileInsecureAndUnverified) {
  crest::testing::TempDir dir;
  absl::StatusOr<crest::testing::TestCa> ca = crest::testing::TestCa::Create(dir.path(), "bench");
  ASSERT_THAT(ca, IsOk());
  absl::StatusOr<crest::testing::CertFiles> leaf = ca->Issue("server");
  ASSERT_THAT(leaf, IsOk());
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(1);
  so.token_interval = absl::Milliseconds(1);
  so.tokens = 3;
  so.cert_file = leaf->cert;
  so.key_file = leaf->key;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  ASSERT_THAT(server->url(), HasSubstr("https://"));

  RunOptions verified = Synthetic(server->url(), 2, 2);
  verified.target.ca_file = ca->ca_file();
  absl::StatusOr<RunOutput> out = RunWithDeadline(verified);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 2U);

  RunOptions insecure = Synthetic(server->url(), 2, 2);
  insecure.target.insecure_skip_verify = true;
  out = RunWithDeadline(insecure);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 2U);

  absl::StatusOr<crest::testing::TestCa> other =
      crest::testing::TestCa::Create(dir.path(), "other");
  ASSERT_THAT(other, IsOk());
  RunOptions unverified = Synthetic(server->url(), 2, 2);
  unverified.target.ca_file = other->ca_file();  // a CA that did not sign the server
  out = RunWithDeadline(unverified);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.failed(), 2U);
  EXPECT_EQ(out->result.failures().count("tls"), 1U) << out->result.ShortDebugString();
}

TEST(RunnerTest, CancelStopsPromptlyWithCancelled) {
  SseServerOptions so;
  so.fault = Fault::kStall;
  so.first_token_delay = absl::Milliseconds(1);
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 2, 4);
  std::atomic<bool> cancel{false};
  auto future = std::async(std::launch::async, [&] { return RunBenchmark(o, nullptr, &cancel); });
  ASSERT_TRUE(server->WaitForReceived(2, kTestDeadline));
  cancel = true;
  ASSERT_EQ(future.wait_for(absl::ToChronoSeconds(kTestDeadline)), std::future_status::ready);
  EXPECT_THAT(future.get(), StatusIs(absl::StatusCode::kCancelled));
}

TEST(RunnerTest, ProgressIsReported) {
  auto server = StartFastServer(3);
  ASSERT_NE(server, nullptr);
  std::vector<crest::v1::BenchmarkProgress> seen;
  absl::StatusOr<RunOutput> out = RunBenchmark(
      Synthetic(server->url(), 2, 4),
      [&](const crest::v1::BenchmarkProgress& p) { seen.push_back(p); }, nullptr);
  ASSERT_THAT(out, IsOk());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().requests_done(), 4U);
  EXPECT_EQ(seen.back().requests_total(), 4U);
}

TEST(RunnerTest, ManagementReadinessIsCheckedFirst) {
  auto server = StartFastServer(2);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 1, 1);
  o.target.management_url = server->url();
  EXPECT_THAT(RunWithDeadline(o), IsOk());
  absl::StatusOr<uint16_t> port = testing::ClosedPort();
  ASSERT_THAT(port, IsOk());
  o.target.management_url = "http://127.0.0.1:" + std::to_string(*port);
  EXPECT_THAT(RunWithDeadline(o),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("/v2/health/ready")));
}

TEST(RunnerTest, RefusedConnectionsFailAlsoOnLibcurl) {
  absl::StatusOr<uint16_t> port = testing::ClosedPort();
  ASSERT_THAT(port, IsOk());
  RunOptions o = Synthetic("http://127.0.0.1:" + std::to_string(*port), 2, 3);
  o.http_client = HttpClient::kLibcurl;
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.failures().at("connect"), 3U);
}

// Runs `n` requests at Concurrency 2 against a fast server with `so`'s
// connection behaviour, on each client: every request must succeed.
void ExpectEveryRequestSucceedsOnBothClients(SseServerOptions so, uint32_t n) {
  so.first_token_delay = absl::Milliseconds(1);
  so.token_interval = absl::Milliseconds(1);
  so.tokens = 3;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  for (HttpClient client : {HttpClient::kAuto, HttpClient::kLibcurl}) {
    RunOptions o = Synthetic(server->url(), 2, n);
    o.http_client = client;
    absl::StatusOr<RunOutput> out = RunWithDeadline(o);
    ASSERT_THAT(out, IsOk());
    EXPECT_EQ(out->result.succeeded(), n)
        << ClientName(client) << " " << out->result.ShortDebugString();
    EXPECT_EQ(out->result.failed(), 0U) << ClientName(client);
  }
}

TEST(RunnerTest, ConnectionsTheServerClosesAfterEachReplyAreReopened) {
  SseServerOptions so;
  so.close_after_reply = true;  // without saying so: the client finds out by itself
  ExpectEveryRequestSucceedsOnBothClients(so, 20);
}

// The server resets every request that comes on a kept-alive connection: each
// is sent once more on a new connection, by both clients, and every one
// succeeds (the server answers each new connection's first request).
TEST(RunnerTest, ARequestResetOnAKeptAliveConnectionIsSentOnceMoreOnANewOne) {
  SseServerOptions so;
  so.reset_kept_alive_requests = true;
  ExpectEveryRequestSucceedsOnBothClients(so, 12);
}

// Whether this machine's resolver names 127.0.0.1 "localhost" (a bare
// container root may have no /etc/hosts).
bool LocalhostIsLoopback() {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo("localhost", nullptr, &hints, &found) != 0) return false;
  bool loopback = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    loopback = loopback || ntohl(in->sin_addr.s_addr) == INADDR_LOOPBACK;
  }
  freeaddrinfo(found);
  return loopback;
}

TEST(RunnerTest, HostNamesAreResolved) {
  if (!LocalhostIsLoopback()) {
    GTEST_SKIP() << "this machine does not resolve localhost to 127.0.0.1 (no /etc/hosts entry)";
  }
  auto server = StartFastServer(2);
  ASSERT_NE(server, nullptr);
  // localhost may name ::1 first; the server listens on 127.0.0.1 only.
  absl::StatusOr<RunOutput> out =
      RunWithDeadline(Synthetic("http://localhost:" + std::to_string(server->port()), 2, 4));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 4U) << out->result.ShortDebugString();
}

TEST(RunnerTest, EveryResultCarriesTheClientsHealth) {
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(5);
  so.token_interval = absl::Milliseconds(5);
  so.tokens = 4;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<RunOutput> out = RunWithDeadline(Synthetic(server->url(), 2, 6));
  ASSERT_THAT(out, IsOk());
  ASSERT_TRUE(out->result.has_client());
  const crest::v1::ClientHealth& c = out->result.client();
  EXPECT_GT(c.wall_seconds(), 0);
  EXPECT_GE(c.cpu_seconds(), 0);
  EXPECT_GE(c.loop_busy(), 0);
  EXPECT_LE(c.loop_busy(), 1);
  EXPECT_GE(c.loop_lag_max_ms(), c.loop_lag_p99_ms());
  EXPECT_GE(c.loop_lag_p99_ms(), c.loop_lag_p50_ms());
  EXPECT_EQ(c.send_lag_p99_ms(), 0);  // concurrency mode has no schedule
  EXPECT_EQ(c.client_bound(), !c.client_bound_reason().empty());
}

// A server that floods tokens while the client's loop is held up (its
// progress callback, which runs on the loop thread, sleeps longer than the
// progress interval): replies are always waiting, the loop never waits for
// them. The mark cannot be missed however loaded the machine is.
TEST(ClientBoundTest, AServerFasterThanTheClientCanRead) {
  SseServerOptions so;
  so.first_token_delay = absl::ZeroDuration();
  so.token_interval = absl::ZeroDuration();
  so.events_per_write = 10;
  so.tokens = 50;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 10, 20);
  absl::StatusOr<RunOutput> out = RunBenchmark(
      o,
      [](const crest::v1::BenchmarkProgress&) {
        absl::SleepFor(absl::Milliseconds(600));  // the burden, not synchronisation
      },
      nullptr);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 20U);
  const crest::v1::ClientHealth& c = out->result.client();
  EXPECT_TRUE(c.client_bound());
  EXPECT_GE(c.loop_busy(), 0.9);
  EXPECT_GT(c.loop_lag_p99_ms(), 100);
  EXPECT_THAT(c.client_bound_reason(), HasSubstr("event loop busy"));
  EXPECT_THAT(c.client_bound_reason(), HasSubstr("event-loop lag p99"));
}

// 10 million requests a second: all 2000 are due within 0.2 ms, and no client
// on any machine turns 2000 requests around in that time.
TEST(ClientBoundTest, ARateTheClientCannotHold) {
  SseServerOptions so;
  so.tokens = 2;
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  RunOptions o = Synthetic(server->url(), 100, 2000);
  o.spec.set_task_kind(crest::v1::TASK_KIND_TEXT);
  o.spec.set_request_rate(1e7);
  o.spec.set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  absl::StatusOr<RunOutput> out = RunWithDeadline(o);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->result.succeeded(), 2000U);
  const crest::v1::ClientHealth& c = out->result.client();
  EXPECT_TRUE(c.client_bound());
  EXPECT_GT(c.send_lag_p99_ms(), 2);
  EXPECT_GE(c.send_lag_max_ms(), c.send_lag_p99_ms());
  EXPECT_THAT(c.client_bound_reason(), HasSubstr("sends fell behind the schedule"));
}

TEST(RunnerTest, BadSpecsAreInvalidArgument) {
  RunOptions o = Synthetic("http://127.0.0.1:1", 0, 1);
  EXPECT_THAT(RunBenchmark(o, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("concurrency")));
  o = Synthetic("ftp://x", 1, 1);
  EXPECT_THAT(RunBenchmark(o, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("http://")));
  o = Synthetic("http://127.0.0.1:1", 1, 0);  // synthetic without any bound
  EXPECT_THAT(RunBenchmark(o, nullptr, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Synthetic("http://127.0.0.1:1", 1, 1);
  o.spec.set_request_rate(-1);
  EXPECT_THAT(RunBenchmark(o, nullptr, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Synthetic("http://127.0.0.1:1", 1, 1);
  o.cpus = {100000};
  EXPECT_THAT(RunBenchmark(o, nullptr, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace crest::loadgen
