// crest-bench's speed: 1000 concurrent streaming requests against a fast SSE
// server in a child process (so getrusage(RUSAGE_SELF) is the client alone).
// Prints the streamed tokens/s the client sustains and its CPU use, wrk's
// requests/s on the same server's non-streaming endpoint as the peer figure
// (beside crest-bench's own in text mode), and how the client's overhead shows
// in the first-token time it reports (against the server's send timestamps).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "loadgen/runner.h"
#include "loadgen/testing/sse_test_server.h"

namespace {

using crest::loadgen::RunOptions;
using crest::loadgen::testing::SseServerOptions;
using crest::loadgen::testing::SseTestServer;

struct ServerSpec {
  int64_t first_token_us = 1000;
  int64_t interval_us = 20000;
  uint32_t per_write = 3;
};

// Child mode: serve until stdin closes (the parent exited or is done).
int Serve(const ServerSpec& spec) {
  SseServerOptions so;
  so.first_token_delay = absl::Microseconds(spec.first_token_us);
  so.token_interval = absl::Microseconds(spec.interval_us);
  so.events_per_write = spec.per_write;
  so.threads = 1;
  auto server = SseTestServer::Start(so);
  if (!server.ok()) {
    std::cerr << server.status() << "\n";
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  char c = 0;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}

// A server child: its port, and the pipe whose closing stops it.
struct Child {
  pid_t pid = -1;
  int stdin_fd = -1;
  uint16_t port = 0;
  void Stop() {
    close(stdin_fd);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

Child SpawnServer(const ServerSpec& spec) {
  int in[2];
  int out[2];
  if (pipe(in) != 0 || pipe(out) != 0) std::abort();
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[1]);
    close(out[0]);
    std::string a = std::to_string(spec.first_token_us);
    std::string b = std::to_string(spec.interval_us);
    std::string c = std::to_string(spec.per_write);
    execl("/proc/self/exe", "loadgen_bench", "--serve", a.c_str(), b.c_str(), c.c_str(), nullptr);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  child.stdin_fd = in[1];
  char buf[32] = {};
  ssize_t n = read(out[0], buf, sizeof(buf) - 1);
  close(out[0]);
  int port = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::string_view(buf, static_cast<size_t>(n - 1)), &port)) {
    std::cerr << "server child did not report its port\n";
    std::exit(1);
  }
  child.port = static_cast<uint16_t>(port);
  return child;
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

RunOptions Streaming(uint16_t port, uint32_t concurrency, uint32_t requests, uint32_t tokens) {
  RunOptions o;
  o.target.base_url = absl::StrCat("http://127.0.0.1:", port);
  o.spec.set_concurrency(concurrency);
  o.spec.set_request_count(requests);
  o.spec.set_max_output_len(tokens);
  o.spec.mutable_dataset()->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
  o.spec.mutable_dataset()->set_synthetic_input_tokens(16);
  return o;
}

struct Figures {
  double tokens_per_s = 0;
  double cpu_cores = 0;
  double qps = 0;
  uint64_t failed = 0;
};

Figures Measure(const RunOptions& o) {
  const double cpu0 = CpuSeconds();
  const absl::Time t0 = absl::Now();
  absl::StatusOr<crest::loadgen::RunOutput> out = crest::loadgen::RunBenchmark(o, nullptr, nullptr);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = CpuSeconds() - cpu0;
  if (!out.ok()) {
    std::cerr << out.status() << "\n";
    std::exit(1);
  }
  return {out->result.generate_speed(), cpu / wall, out->result.qps(), out->result.failed()};
}

double WrkRequestsPerSecond(uint16_t port, int connections) {
  char dir_template[] = "/tmp/crest-wrk-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return -1;
  const std::string script = std::string(dir) + "/post.lua";
  (void)crest::WriteFileAtomically(script,
                                   "wrk.method = \"POST\"\n"
                                   "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
                                   "wrk.body = '{\"inputs\":\"hi hi hi hi\",\"stream\":false,"
                                   "\"parameters\":{\"max_new_tokens\":16}}'\n");
  const std::string cmd = absl::StrCat("wrk -t1 -c", connections, " -d5s -s ", script,
                                       " http://127.0.0.1:", port, "/infer 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  double rps = -1;
  char line[512];
  while (pipe != nullptr && fgets(line, sizeof(line), pipe) != nullptr) {
    if (std::strncmp(line, "Requests/sec:", 13) == 0) rps = std::atof(line + 13);
  }
  if (pipe != nullptr) pclose(pipe);
  unlink(script.c_str());
  rmdir(dir);
  return rps;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--serve") {
    ServerSpec spec{std::atoll(argv[2]), std::atoll(argv[3]),
                    static_cast<uint32_t>(std::atoi(argv[4]))};
    return Serve(spec);
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  constexpr uint32_t kClients = 1000;
  constexpr uint32_t kTokens = 300;

  // 1. Sustained: 1000 streams offered 200 tokens/s each (10 events per 50 ms).
  Child paced = SpawnServer({1000, 50000, 10});
  Figures a = Measure(Streaming(paced.port, kClients, 3 * kClients, kTokens));
  paced.Stop();
  std::printf(
      "sustained: 1000 streams, offered 200000 tokens/s: client measured %.0f tokens/s, "
      "client CPU %.2f cores, %lu failed\n",
      a.tokens_per_s, a.cpu_cores, static_cast<unsigned long>(a.failed));

  // 2. Ceiling: the server writes as fast as it can (10 events per write).
  Child flat = SpawnServer({0, 0, 10});
  Figures b = Measure(Streaming(flat.port, kClients, 3 * kClients, kTokens));
  std::printf(
      "ceiling: 1000 streams, unpaced server (10 events per write): %.0f tokens/s, "
      "client CPU %.2f cores, %lu failed\n",
      b.tokens_per_s, b.cpu_cores, static_cast<unsigned long>(b.failed));

  // 3. Peer figure on the same server's non-streaming endpoint: wrk vs crest-bench (text).
  const double wrk = WrkRequestsPerSecond(flat.port, 100);
  RunOptions text = Streaming(flat.port, 100, 20000, 16);
  text.spec.set_task_kind(crest::v1::TASK_KIND_TEXT);
  Figures c = Measure(text);
  flat.Stop();
  std::printf(
      "non-streaming POST /infer, 100 connections: wrk %.0f requests/s; crest-bench "
      "%.0f requests/s (client CPU %.2f cores)\n",
      wrk, c.qps, c.cpu_cores);

  // 4. The client's overhead in its own timing: in-process server, paced
  //    streams; first-token time as the client saw it vs the server's stamps
  //    (request fully read -> first token handed to the kernel).
  for (uint32_t clients : {100U, kClients}) {
    SseServerOptions so;
    so.first_token_delay = absl::Milliseconds(50);
    so.token_interval = absl::Milliseconds(100);
    so.events_per_write = 10;
    so.tokens = 100;
    so.threads = 1;
    auto server = SseTestServer::Start(so);
    if (!server.ok()) return 1;
    absl::StatusOr<crest::loadgen::RunOutput> out = crest::loadgen::RunBenchmark(
        Streaming((*server)->port(), clients, 3 * clients, 100), nullptr, nullptr);
    if (!out.ok()) return 1;
    std::vector<crest::loadgen::testing::ServedRequest> served = (*server)->Served();
    double server_ttft = 0;
    for (const auto& s : served) {
      server_ttft += absl::ToDoubleMilliseconds(s.first_token_sent - s.received);
    }
    server_ttft /= static_cast<double>(served.size());
    const double client_ttft = out->result.first_token_time().average_ms();
    std::printf(
        "timing overhead, %u streams x 100 tokens/s: client FirstTokenTime avg %.3f ms "
        "(p50 %.3f), server-side %.3f ms, client adds %.3f ms (%.2f%%)\n",
        clients, client_ttft, out->result.first_token_time().p50_ms(), server_ttft,
        client_ttft - server_ttft, 100.0 * (client_ttft - server_ttft) / server_ttft);
  }
  return 0;
}
