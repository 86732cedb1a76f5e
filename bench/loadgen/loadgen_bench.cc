// crest-bench's speed and timing accuracy, each figure beside its peers in the
// same run: wrk and h2load (HTTP/1.1) on the same server for throughput, the
// server's own timestamps for FirstTokenTime. On a machine with two or more
// CPUs the client (crest-bench, wrk or h2load alike) runs on CPU 0 and the
// server on CPU 1. Loopback only; about 90 seconds in all.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"

#include "common/file_util.h"
#include "loadgen/runner.h"
#include "loadgen/testing/sse_test_server.h"

namespace {

using crest::loadgen::HttpClient;
using crest::loadgen::RunOptions;
using crest::loadgen::RunOutput;
using crest::loadgen::testing::SseServerOptions;
using crest::loadgen::testing::SseTestServer;

constexpr const char* kUsage =
    "loadgen_bench: crest-bench's throughput, CPU use and FirstTokenTime accuracy beside wrk "
    "and h2load (HTTP/1.1) on a loopback test server.\n"
    "usage: loadgen_bench [--seconds S]   (S: length of each throughput run, default 2; each\n"
    "                                      is run 5 times, the tools taking turns)\n";

bool TwoCpus() { return std::thread::hardware_concurrency() >= 2; }
std::vector<uint32_t> ClientCpus() {
  return TwoCpus() ? std::vector<uint32_t>{0} : std::vector<uint32_t>{};
}
std::vector<uint32_t> ServerCpus() {
  return TwoCpus() ? std::vector<uint32_t>{1} : std::vector<uint32_t>{};
}
std::string Taskset() { return TwoCpus() ? "taskset -c 0 " : ""; }

struct ServerSpec {
  int64_t first_token_us = 0;
  int64_t interval_us = 0;
  uint32_t per_write = 10;
  bool canned = false;  // ServeCanned instead of the SSE test server
};

// The non-streaming reply of the canned server: what MindIE's /infer answers.
constexpr absl::string_view kCannedBody =
    R"({"generated_text":"t0 t1 t2 t3 t4 t5 t6 t7 t8 t9 t10 t11 t12 t13 t14 t15 ",)"
    R"("details":{"finish_reason":"length","generated_tokens":16,"prompt_tokens":7}})";

// Child mode for the non-streaming ceiling: one thread on epoll answering
// every request at once with the same reply, a few microseconds each, so the
// clients (crest-bench, wrk, h2load) rather than the server are the limit.
int ServeCanned() {
  if (!ServerCpus().empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(ServerCpus().front(), &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  const std::string reply = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ", kCannedBody.size(),
      "\r\n\r\n", kCannedBody);
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 4096) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("canned server");
    return 1;
  }
  std::printf("%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  const int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  ev.data.fd = STDIN_FILENO;  // closed by the parent: time to go
  epoll_ctl(ep, EPOLL_CTL_ADD, STDIN_FILENO, &ev);
  std::vector<std::string> pending(65536);  // unparsed request bytes by fd
  std::vector<epoll_event> events(256);
  char buf[65536];
  while (true) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == STDIN_FILENO) return 0;
      if (fd == listener) {
        int c = -1;
        while ((c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK)) >= 0) {
          const int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          ev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
          if (static_cast<size_t>(c) >= pending.size()) pending.resize(c + 1);
          pending[c].clear();
        }
        continue;
      }
      const ssize_t got = read(fd, buf, sizeof(buf));
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        close(fd);
        continue;
      }
      std::string& in = pending[fd];
      in.append(buf, static_cast<size_t>(got));
      std::string out;
      // Answer every complete request: headers, then Content-Length bytes.
      while (true) {
        const size_t head_end = in.find("\r\n\r\n");
        if (head_end == std::string::npos) break;
        size_t body = 0;
        for (const char* name : {"Content-Length:", "content-length:"}) {
          const size_t at = in.find(name);
          if (at != std::string::npos && at < head_end)
            body = std::strtoul(&in[at + 15], nullptr, 10);
        }
        if (in.size() < head_end + 4 + body) break;
        in.erase(0, head_end + 4 + body);
        out += reply;
      }
      if (!out.empty() && write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
        close(fd);  // the client does not read: give up on it
      }
    }
  }
}

// Child mode: serve (pinned to the server CPU) until stdin closes.
int Serve(const ServerSpec& spec) {
  SseServerOptions so;
  so.first_token_delay = absl::Microseconds(spec.first_token_us);
  so.token_interval = absl::Microseconds(spec.interval_us);
  so.events_per_write = spec.per_write;
  so.threads = 1;
  so.cpus = ServerCpus();
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
  void Stop() const {
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
    if (spec.canned) execl("/proc/self/exe", "loadgen_bench", "--serve-canned", nullptr);
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

// A peer tool's output and CPU use (wait4's rusage of the child).
struct PeerRun {
  std::string output;
  double cpu_seconds = 0;
  double wall_seconds = 0;
};

PeerRun RunPeer(const std::string& command) {
  PeerRun run;
  int out[2];
  if (pipe(out) != 0) std::abort();
  const absl::Time t0 = absl::Now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    execl("/bin/sh", "sh", "-c", absl::StrCat("exec ", command).c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) run.output.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  run.wall_seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  run.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  return run;
}

// A throughput figure: rate and the client's CPU in cores.
struct Rate {
  double per_second = -1;
  double cpu_cores = 0;
  bool client_bound = false;
  uint64_t failed = 0;
};

std::string Body(bool stream, uint32_t tokens) {
  return absl::StrCat(R"({"inputs":"hi hi hi hi","stream":)", stream ? "true" : "false",
                      R"(,"parameters":{"max_new_tokens":)", tokens, "}}");
}

std::string TempFile(const std::string& name, const std::string& content) {
  std::string path = absl::StrCat("/tmp/crest-loadgen-bench-", getpid(), "-", name);
  if (!crest::WriteFileAtomically(path, content).ok()) std::abort();
  return path;
}

// wrk: requests/s over `seconds`, one thread.
Rate Wrk(uint16_t port, int connections, int seconds, const std::string& body) {
  const std::string script =
      TempFile("post.lua", absl::StrCat("wrk.method = \"POST\"\n"
                                        "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
                                        "wrk.body = '",
                                        body, "'\n"));
  PeerRun run = RunPeer(absl::StrCat(Taskset(), "wrk -t1 -c", connections, " -d", seconds, "s -s ",
                                     script, " http://127.0.0.1:", port, "/infer"));
  unlink(script.c_str());
  Rate r;
  for (absl::string_view line : absl::StrSplit(run.output, '\n')) {
    if (absl::ConsumePrefix(&line, "Requests/sec:")) {
      (void)absl::SimpleAtod(absl::StripAsciiWhitespace(line), &r.per_second);
    }
  }
  r.cpu_cores = run.cpu_seconds / run.wall_seconds;
  if (r.per_second < 0) std::cerr << "wrk gave no figure:\n" << run.output;
  return r;
}

// h2load in HTTP/1.1 mode: requests/s over `seconds`, one thread.
Rate H2load(uint16_t port, int connections, int seconds, const std::string& body) {
  const std::string data = TempFile("body.json", body);
  PeerRun run = RunPeer(absl::StrCat(Taskset(), "h2load --h1 -t1 -c", connections, " -D ", seconds,
                                     " -d ", data, " -H 'Content-Type: application/json'",
                                     " http://127.0.0.1:", port, "/infer"));
  unlink(data.c_str());
  Rate r;
  // "finished in 4.00s, 54660.75 req/s, 11.68MB/s"
  for (absl::string_view line : absl::StrSplit(run.output, '\n')) {
    if (!absl::ConsumePrefix(&line, "finished in ")) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ", ");
    if (parts.size() >= 2 && absl::ConsumeSuffix(&parts[1], " req/s")) {
      (void)absl::SimpleAtod(parts[1], &r.per_second);
    }
  }
  r.cpu_cores = run.cpu_seconds / run.wall_seconds;
  if (r.per_second < 0) std::cerr << "h2load gave no figure:\n" << run.output;
  return r;
}

RunOptions Options(uint16_t port, uint32_t concurrency, uint32_t tokens) {
  RunOptions o;
  o.target.base_url = absl::StrCat("http://127.0.0.1:", port);
  o.spec.set_concurrency(concurrency);
  o.spec.set_max_output_len(tokens);
  o.spec.mutable_dataset()->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
  o.spec.mutable_dataset()->set_synthetic_input_tokens(4);
  o.cpus = ClientCpus();
  return o;
}

RunOutput MustRun(const RunOptions& o) {
  absl::StatusOr<RunOutput> out = crest::loadgen::RunBenchmark(o, nullptr, nullptr);
  if (!out.ok()) {
    std::cerr << out.status() << "\n";
    std::exit(1);
  }
  return *std::move(out);
}

// crest-bench for `seconds`: requests/s (text) or tokens/s (stream).
Rate CrestBench(RunOptions o, int seconds, bool tokens) {
  *o.spec.mutable_max_duration() = google::protobuf::util::TimeUtil::SecondsToDuration(seconds);
  RunOutput out = MustRun(o);
  Rate r;
  r.per_second = tokens ? out.result.generate_speed() : out.result.qps();
  r.cpu_cores = out.result.client().cpu_utilisation();
  r.client_bound = out.result.client().client_bound();
  r.failed = out.result.failed();
  return r;
}

// Each throughput figure is the median of this many runs, the tools taking
// turns, so that a slow moment of a shared machine hits them all alike.
constexpr int kRounds = 5;

// The run with the median rate (its CPU with it).
Rate Median(std::vector<Rate> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Rate& a, const Rate& b) { return a.per_second < b.per_second; });
  return runs[runs.size() / 2];
}

// Runs every measurement kRounds times, taking turns; the median of each.
std::vector<Rate> Interleaved(const std::vector<std::function<Rate()>>& measurements) {
  std::vector<std::vector<Rate>> runs(measurements.size());
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < measurements.size(); ++i) runs[i].push_back(measurements[i]());
  }
  std::vector<Rate> medians;
  medians.reserve(runs.size());
  for (std::vector<Rate>& r : runs) medians.push_back(Median(std::move(r)));
  return medians;
}

std::string Ratio(double a, double b) {
  return b > 0 && a >= 0 ? absl::StrFormat("%.2fx", a / b) : std::string("n/a");
}

// FirstTokenTime as crest-bench reports it against the server's own stamps:
// the request's arrival in the server's kernel -> the first token's write.
// What is left is the client's: its send path, loopback, its receive path.
struct Timing {
  uint32_t streams = 0;
  double client_ms = 0;
  double client_p50_ms = 0;
  double server_ms = 0;
  double send_side_ms = 0;     // request reached the server's kernel - client sent it
  double server_read_ms = 0;   // server read the request - it reached the server's kernel
  double receive_side_ms = 0;  // client stamped the token - server wrote it
  double cpu_cores = 0;
  double loop_lag_p99_ms = 0;
  bool client_bound = false;
  double added() const { return client_ms - server_ms; }
};

Timing MeasureTiming(uint32_t streams, uint32_t requests, HttpClient client) {
  SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(50);
  so.token_interval = absl::Milliseconds(100);  // 100 tokens/s per stream
  so.events_per_write = 10;
  so.tokens = 30;
  so.threads = 1;
  so.cpus = ServerCpus();
  so.stamp_arrival = true;
  auto server = SseTestServer::Start(so);
  if (!server.ok()) std::exit(1);
  RunOptions o = Options((*server)->port(), streams, 30);
  o.spec.set_request_count(requests);
  o.spec.set_warmup_requests(streams);  // every connection has carried a request
  o.http_client = client;
  const RunOutput out = MustRun(o);
  if (!(*server)->WaitForServed(streams + requests, absl::Seconds(30))) std::exit(1);
  std::vector<crest::loadgen::testing::ServedRequest> served = (*server)->Served();
  std::sort(served.begin(), served.end(),
            [](const auto& a, const auto& b) { return a.arrived < b.arrived; });
  served.erase(served.begin(), served.begin() + streams);  // the warm-up
  // Means of absolute times need no matching of client and server records.
  const absl::Time epoch = out.requests.front().sent;
  auto ms = [epoch](absl::Time t) { return absl::ToDoubleMilliseconds(t - epoch); };
  double sent = 0;
  double token_seen = 0;
  double arrived = 0;
  double read = 0;
  double token_written = 0;
  for (const auto& r : out.requests) {
    sent += ms(r.sent);
    token_seen += ms(r.sent) + r.first_token_ms;
  }
  for (const auto& s : served) {
    arrived += ms(s.arrived);
    read += ms(s.received);
    token_written += ms(s.first_token_sent);
  }
  const auto nc = static_cast<double>(out.requests.size());
  const auto ns = static_cast<double>(served.size());
  Timing t;
  t.streams = streams;
  t.client_ms = out.result.first_token_time().average_ms();
  t.client_p50_ms = out.result.first_token_time().p50_ms();
  t.server_ms = (token_written - arrived) / ns;
  t.send_side_ms = arrived / ns - sent / nc;
  t.server_read_ms = (read - arrived) / ns;
  t.receive_side_ms = token_seen / nc - token_written / ns;
  t.cpu_cores = out.result.client().cpu_utilisation();
  t.loop_lag_p99_ms = out.result.client().loop_lag_p99_ms();
  t.client_bound = out.result.client().client_bound();
  return t;
}

void PrintTiming(const Timing& t, const char* label) {
  std::printf(
      "  %-9s %4u streams: client FirstTokenTime avg %.3f ms (p50 %.3f), server %.3f ms: client "
      "adds %.3f ms = %.2f%% of the server's (send side %.3f, receive side %.3f; the server's "
      "thread read requests %.3f ms after they arrived); client CPU %.2f cores, loop lag p99 "
      "%.2f ms%s\n",
      label, t.streams, t.client_ms, t.client_p50_ms, t.server_ms, t.added(),
      100 * t.added() / t.server_ms, t.send_side_ms, t.receive_side_ms, t.server_read_ms,
      t.cpu_cores, t.loop_lag_p99_ms, t.client_bound ? ", CLIENT-BOUND" : "");
}

// Client CPU per request (or token), in microseconds.
double CpuUs(const Rate& r) { return r.per_second > 0 ? 1e6 * r.cpu_cores / r.per_second : 0; }

void PrintPeer(const char* label, const Rate& r, const Rate* wrk, const char* unit) {
  std::printf("  %-22s %10.0f %s%s; CPU %.2f cores, %.2f us per %s\n", label, r.per_second, unit,
              wrk == nullptr
                  ? ""
                  : absl::StrCat(" = ", Ratio(r.per_second, wrk->per_second), " wrk").c_str(),
              r.cpu_cores, CpuUs(r), unit[0] == 'r' ? "request" : "token");
}

void PrintRate(const char* label, const Rate& r, const Rate& wrk, const Rate& h2load,
               const char* unit) {
  std::printf(
      "  %-22s %10.0f %s = %s wrk, %s h2load; client CPU %.2f cores, %.2f us per %s (%s wrk's, "
      "%s h2load's)%s%s\n",
      label, r.per_second, unit, Ratio(r.per_second, wrk.per_second).c_str(),
      Ratio(r.per_second, h2load.per_second).c_str(), r.cpu_cores, CpuUs(r),
      unit[0] == 'r' ? "request" : "token", Ratio(CpuUs(r), CpuUs(wrk)).c_str(),
      Ratio(CpuUs(r), CpuUs(h2load)).c_str(), r.client_bound ? ", client-bound" : "",
      r.failed > 0 ? absl::StrCat(", ", r.failed, " FAILED").c_str() : "");
}

// The child modes (the servers this program spawns) and --seconds; the exit
// code when there is nothing more to do.
std::optional<int> ParseArgs(int argc, char** argv, int* seconds) {
  if (argc == 2 && std::string(argv[1]) == "--serve-canned") return ServeCanned();
  if (argc == 5 && std::string(argv[1]) == "--serve") {
    ServerSpec spec{std::atoll(argv[2]), std::atoll(argv[3]),
                    static_cast<uint32_t>(std::atoi(argv[4]))};
    return Serve(spec);
  }
  if (argc == 3 && std::string(argv[1]) == "--seconds" && absl::SimpleAtoi(argv[2], seconds) &&
      *seconds > 0 && *seconds <= 30) {
  } else if (argc != 1) {
    std::fputs(kUsage, argc == 2 && std::string(argv[1]) == "--help" ? stdout : stderr);
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  return std::nullopt;
}

// 1. FirstTokenTime: what the client adds to the server's own figure; the
//    own HTTP client's, by streams (libcurl's is only printed).
std::vector<Timing> MeasureFirstTokenTimes() {
  std::printf(
      "FirstTokenTime, 50 ms first token then 100 tokens/s per stream (10 per write), "
      "connections warmed:\n");
  std::vector<Timing> timings;
  for (auto [streams, requests] :
       {std::pair<uint32_t, uint32_t>{1, 12}, {100, 300}, {1000, 3000}}) {
    timings.push_back(MeasureTiming(streams, requests, HttpClient::kAuto));
    PrintTiming(timings.back(), "own http");
  }
  const Timing curl_timing = MeasureTiming(1000, 3000, HttpClient::kLibcurl);
  PrintTiming(curl_timing, "libcurl");
  return timings;
}

// Requests/s (or tokens/s) of crest-bench and its peers in one measurement.
struct PeerRates {
  Rate wrk;
  Rate h2load;
  Rate crest;
  Rate crest_curl;  // non-streaming only
};

// 2. Non-streaming POST /infer, 100 connections, against the canned server:
//    the clients are the limit, so the figures are their ceilings.
PeerRates MeasureNonStreaming(int seconds) {
  Child canned = SpawnServer({.canned = true});
  const std::string text_body = Body(false, 16);
  std::printf(
      "Non-streaming POST /infer, 100 connections, canned-reply server (the clients are the "
      "limit), median of %d interleaved %d s runs:\n",
      kRounds, seconds);
  RunOptions text = Options(canned.port, 100, 16);
  text.spec.set_task_kind(crest::v1::TASK_KIND_TEXT);
  RunOptions text_curl = text;
  text_curl.http_client = HttpClient::kLibcurl;
  const std::vector<Rate> text_rates =
      Interleaved({[&] { return Wrk(canned.port, 100, seconds, text_body); },
                   [&] { return H2load(canned.port, 100, seconds, text_body); },
                   [&] { return CrestBench(text, seconds, false); },
                   [&] { return CrestBench(text_curl, seconds, false); }});
  canned.Stop();
  PeerRates r{text_rates[0], text_rates[1], text_rates[2], text_rates[3]};
  PrintPeer("wrk", r.wrk, nullptr, "req/s");
  PrintPeer("h2load --h1", r.h2load, &r.wrk, "req/s");
  PrintRate("crest-bench", r.crest, r.wrk, r.h2load, "req/s");
  PrintRate("crest-bench (libcurl)", r.crest_curl, r.wrk, r.h2load, "req/s");
  return r;
}

// 3. Streaming, 1000 streams of 300 tokens, the server writing as fast as
//    it can (10 events per write). The peers do not parse the events: their
//    figure is requests/s x 300.
PeerRates MeasureStreaming(int seconds) {
  Child flat = SpawnServer({0, 0, 10});
  std::printf(
      "Streaming, 1000 streams x 300 tokens, unpaced server, median of %d interleaved %d s "
      "runs:\n",
      kRounds, seconds);
  const std::string stream_body = Body(true, 300);
  const std::vector<Rate> stream_rates =
      Interleaved({[&] { return Wrk(flat.port, 1000, seconds, stream_body); },
                   [&] { return H2load(flat.port, 1000, seconds, stream_body); },
                   [&] { return CrestBench(Options(flat.port, 1000, 300), seconds, true); }});
  flat.Stop();
  PeerRates r{stream_rates[0], stream_rates[1], stream_rates[2], Rate{}};
  r.wrk.per_second *= 300;
  r.h2load.per_second *= 300;
  PrintPeer("wrk", r.wrk, nullptr, "tokens/s");
  PrintPeer("h2load --h1", r.h2load, &r.wrk, "tokens/s");
  PrintRate("crest-bench", r.crest, r.wrk, r.h2load, "tokens/s");
  return r;
}

// 4. Sustained: 1000 streams offered 200 tokens/s each (10 events per 50 ms).
Rate MeasureSustained(int seconds) {
  Child paced = SpawnServer({1000, 50000, 10});
  const Rate sustained = CrestBench(Options(paced.port, 1000, 300), 2 * seconds, true);
  paced.Stop();
  std::printf(
      "Sustained, 1000 streams offered 200000 tokens/s: crest-bench %.0f tokens/s, client CPU "
      "%.2f cores%s\n",
      sustained.per_second, sustained.cpu_cores, sustained.client_bound ? ", client-bound" : "");
  return sustained;
}

void PrintSummary(const std::vector<Timing>& timings, const PeerRates& text,
                  const PeerRates& stream, const Rate& sustained) {
  const Rate& crest = text.crest;
  const Rate& wrk = text.wrk;
  const Rate& h2 = text.h2load;
  const Rate& sflat = stream.crest;
  const Rate& swrk = stream.wrk;
  const Rate& sh2 = stream.h2load;
  std::printf("\n| figure | crest-bench | peers (same run) |\n|---|---|---|\n");
  for (const Timing& t : timings) {
    std::printf(
        "| client-added FirstTokenTime, %u stream%s | %.3f ms (%.2f%%) | server %.3f ms |\n",
        t.streams, t.streams == 1 ? "" : "s", t.added(), 100 * t.added() / t.server_ms,
        t.server_ms);
  }
  std::printf("| non-streaming req/s, 100 connections | %.0f | %s wrk (%.0f), %s h2load (%.0f) |\n",
              crest.per_second, Ratio(crest.per_second, wrk.per_second).c_str(), wrk.per_second,
              Ratio(crest.per_second, h2.per_second).c_str(), h2.per_second);
  std::printf("| streaming tokens/s, 1000 streams | %.0f | %s wrk (%.0f), %s h2load (%.0f) |\n",
              sflat.per_second, Ratio(sflat.per_second, swrk.per_second).c_str(), swrk.per_second,
              Ratio(sflat.per_second, sh2.per_second).c_str(), sh2.per_second);
  std::printf(
      "| client CPU, cores (non-streaming / streaming / 200k tokens/s paced) | %.2f / %.2f / "
      "%.2f | wrk %.2f / %.2f, h2load %.2f / %.2f |\n",
      crest.cpu_cores, sflat.cpu_cores, sustained.cpu_cores, wrk.cpu_cores, swrk.cpu_cores,
      h2.cpu_cores, sh2.cpu_cores);
  std::printf(
      "| client CPU per non-streaming request | %.2f us | %s wrk's (%.2f us), %s h2load's (%.2f "
      "us) |\n",
      CpuUs(crest), Ratio(CpuUs(crest), CpuUs(wrk)).c_str(), CpuUs(wrk),
      Ratio(CpuUs(crest), CpuUs(h2)).c_str(), CpuUs(h2));
  std::printf("| same, libcurl path (`--http-client libcurl`) | %.2f us, %.0f req/s | %s wrk |\n",
              CpuUs(text.crest_curl), text.crest_curl.per_second,
              Ratio(text.crest_curl.per_second, wrk.per_second).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 2;
  if (auto rc = ParseArgs(argc, argv, &seconds)) return *rc;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  std::printf("loadgen_bench: client on %s, server on %s; load average at start: ",
              TwoCpus() ? "CPU 0" : "any CPU", TwoCpus() ? "CPU 1" : "any CPU");
  std::fflush(stdout);
  std::system("cut -d' ' -f1-3 /proc/loadavg");

  const std::vector<Timing> timings = MeasureFirstTokenTimes();
  const PeerRates text = MeasureNonStreaming(seconds);
  const PeerRates stream = MeasureStreaming(seconds);
  const Rate sustained = MeasureSustained(seconds);
  PrintSummary(timings, text, stream, sustained);
  return 0;
}
