// controller-load-bench: the real crest-controller process under the load of
// many agents and campaigns at once. The agents are fakes in this process
// over real gRPC and mutual TLS (fleet.h): each registers and heartbeats with
// the real agent's Registrar and answers the controller's trial calls with
// the simulator's noise-free throughput curve after `--benchmark-seconds`.
// Each campaign searches its own group of agents (a grid with repeats sized
// so that it lasts about --duration); an operator watches each one. Prints
// trials per minute, the controller's CPU and memory from /proc, heartbeat
// latency and age, agents ever declared lost (crest_agent_lost_total), and
// whether every campaign succeeded with every trial ok; exits 1 otherwise.
#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "agent/http_probe.h"
#include "bench/load/fleet.h"
#include "common/command_line.h"
#include "common/paths.h"
#include "common/status.h"
#include "common/tls.h"
#include "crest/v1/controller.grpc.pb.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "sim/simulate.h"
#include "tests/e2e/e2e_harness.h"

namespace {

using crest::bench::Fleet;
using crest::e2e::Process;

struct Flags {
  int agents = 64;
  int campaigns = 4;
  double duration_s = 60;
  double benchmark_s = 1;
  double heartbeat_s = 2;
  std::string model = "LLaMa3-8B";
  uint32_t request_count = 1000;
  uint32_t max_output_len = 256;
  std::string log_level = "info";
};

// One campaign's grid: `points` values of maxBatchSize from `lo` by `step`,
// each measured `repeats` times.
struct Grid {
  int64_t lo = 8;
  int64_t step = 8;
  int64_t points = 1;
  uint32_t repeats = 1;
  int64_t trials() const { return points * repeats; }
  int64_t hi() const { return lo + (points - 1) * step; }
};

// About --duration of work for a group of `nodes` agents: nodes x waves
// trials, as few points as repeats (at most 100) allow.
Grid GridFor(const Flags& f, int nodes) {
  const auto waves = std::max<int64_t>(1, std::llround(f.duration_s / f.benchmark_s));
  const int64_t trials = waves * nodes;
  Grid g;
  g.repeats = static_cast<uint32_t>(std::clamp<int64_t>((trials + 49) / 50, 1, 100));
  g.points = (trials + g.repeats - 1) / g.repeats;
  return g;
}

crest::v1::CampaignSpec SpecFor(const Flags& f, const Grid& g, int index, int nodes) {
  crest::v1::CampaignSpec spec;
  spec.set_name(absl::StrCat("load-", index));
  auto* m = spec.add_models();
  m->set_name(f.model);
  (*m->mutable_selector())["group"] = absl::StrCat("g", index);
  m->set_parallel(static_cast<uint32_t>(nodes));
  auto* s = spec.mutable_search();
  s->set_strategy("grid");
  s->set_range_lo(g.lo);
  s->set_range_hi(g.hi());
  s->set_initial(g.lo);
  s->set_step(g.step);
  s->set_repeats(g.repeats);
  s->set_max_trials(static_cast<uint32_t>(g.points));
  auto* c = spec.mutable_client();
  c->set_request_count(f.request_count);
  c->set_max_output_len(f.max_output_len);
  spec.mutable_host()->set_governor("performance");
  spec.mutable_host()->set_thp("always");
  return spec;
}

// GenerateSpeed of each grid point in mindie-sim's noise-free virtual time:
// GSM8K's average request (186 prompt tokens, 346 generated, capped),
// Concurrency = maxBatchSize - 1, MindIE's reference 17 GiB of KV cache.
struct Curve {
  int64_t npu_block_num = 0;
  std::map<int64_t, double> speed;
};

absl::StatusOr<Curve> SimulatedCurve(const Flags& f, const Grid& g) {
  CREST_ASSIGN_OR_RETURN(std::string share, crest::ShareDir());
  CREST_ASSIGN_OR_RETURN(crest::sim::Profile profile,
                         crest::sim::FindProfile(share + "/profiles", "", f.model));
  CREST_ASSIGN_OR_RETURN(
      auto kv, crest::sim::ComputeKvCache(profile, profile.reference_world_size, 17, 128));
  Curve curve;
  curve.npu_block_num = kv.computed_blocks;
  const std::vector<crest::sim::WorkloadRequest> requests(
      f.request_count, {186, static_cast<int>(std::min<uint32_t>(346, f.max_output_len))});
  for (int64_t i = 0; i < g.points; ++i) {
    const int64_t b = g.lo + i * g.step;
    crest::sim::SchedulerConfig config;
    config.max_batch_size = static_cast<int>(b);
    config.max_prefill_batch_size = std::max<int>(1, static_cast<int>(b / 2));
    config.num_blocks = curve.npu_block_num - 1;  // the engine keeps one in reserve
    curve.speed[b] =
        crest::sim::SimulateWorkload(config, profile.TimingAt(profile.reference_world_size),
                                     requests, static_cast<int>(std::max<int64_t>(1, b - 1)), 0, 1)
            .generate_speed;
  }
  return curve;
}

// user + system CPU seconds of `pid` (/proc/PID/stat fields 14 and 15).
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(text.substr(close + 2), ' ');
  // fields[0] is field 3 (state): utime is field 14, stime 15.
  double utime = 0;
  double stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A "VmXXX:  1234 kB" line of /proc/PID/status, in MiB.
double StatusMiB(pid_t pid, const std::string& key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    double kb = 0;
    fields >> kb;
    return kb / 1024;
  }
  return 0;
}

int Threads(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return 0;
}

// What one scrape of the controller's /metrics says.
struct Scrape {
  bool ok = false;
  double lost_total = 0;         // sum of crest_agent_lost_total
  double max_heartbeat_age = 0;  // max of crest_agent_heartbeat_age_seconds
};

Scrape ScrapeMetrics(const std::string& url) {
  Scrape s;
  auto body = crest::agent::HttpGetBody(url, absl::Seconds(5), "", 16 << 20);
  if (!body.ok()) return s;
  s.ok = true;
  for (absl::string_view line : absl::StrSplit(*body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    if (absl::StartsWith(line, "crest_agent_lost_total")) s.lost_total += value;
    if (absl::StartsWith(line, "crest_agent_heartbeat_age_seconds")) {
      s.max_heartbeat_age = std::max(s.max_heartbeat_age, value);
    }
  }
  return s;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

int Fail(const std::string& what, Process* controller = nullptr) {
  std::fprintf(stderr, "controller-load-bench: %s\n", what.c_str());
  if (controller != nullptr) {
    std::string out = controller->output();
    if (out.size() > 4000) out = "..." + out.substr(out.size() - 4000);
    std::fprintf(stderr, "controller output (tail):\n%s\n", out.c_str());
  }
  return 1;
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--agents", f.agents, "fake agents")->check(CLI::Range(1, 1024));
  app.add_option("--campaigns", f.campaigns, "campaigns at once, each on its own group of agents")
      ->check(CLI::Range(1, 64));
  app.add_option("--duration", f.duration_s,
                 "seconds of work per campaign at the agents' pace (campaigns are sized by it)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--benchmark-seconds", f.benchmark_s, "wall time of each fake benchmark")
      ->check(CLI::Range(0.01, 3600.0));
  app.add_option("--heartbeat-interval", f.heartbeat_s,
                 "the controller's --heartbeat-interval (3 missed mark an agent lost)")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--model", f.model, "model (and simulator profile) the agents serve");
  app.add_option("--request-count", f.request_count, "requests per trial in the simulated curve")
      ->check(CLI::Range(1, 100000));
  app.add_option("--controller-log-level", f.log_level, "the controller's --log-level");
}

absl::StatusOr<std::unique_ptr<Process>> StartController(const Flags& f,
                                                         const crest::testing::CertFiles& cert,
                                                         const std::string& ca_file,
                                                         const crest::testing::TempDir& dir) {
  return Process::Start(
      "crest-controller",
      {"--listen", "127.0.0.1:0", "--state-dir", dir.File("controller"), "--metrics-listen",
       "127.0.0.1:0", "--heartbeat-interval", absl::StrCat(f.heartbeat_s), "--log-level",
       f.log_level, "--tls-cert", cert.cert, "--tls-key", cert.key, "--tls-ca", ca_file},
      "controller");
}

// The operator's (crest-cli's) stub to the controller at `address`.
absl::StatusOr<std::unique_ptr<crest::v1::Controller::Stub>> OperatorStub(
    const std::string& address, const crest::testing::CertFiles& cert, const std::string& ca_file) {
  crest::TlsOptions cli_tls{.insecure = false,
                            .cert_file = cert.cert,
                            .key_file = cert.key,
                            .ca_file = ca_file,
                            .server_name_override = ""};
  CREST_ASSIGN_OR_RETURN(auto channel, crest::MakeChannel(address, cli_tls));
  return crest::v1::Controller::NewStub(channel);
}

crest::bench::FleetOptions FleetOptionsFor(const Flags& f, const std::string& address,
                                           const crest::testing::TestCa* ca, const Curve& curve) {
  crest::bench::FleetOptions options;
  options.agents = f.agents;
  options.groups = f.campaigns;
  options.controller = address;
  options.ca = ca;
  options.model = f.model;
  options.npu_block_num = curve.npu_block_num;
  options.curve = [speed = curve.speed](int64_t b) {
    auto it = speed.find(b);
    return it != speed.end() ? it->second : 0.0;
  };
  options.node.benchmark_time = absl::Seconds(f.benchmark_s);
  return options;
}

// Every agent ready before the campaigns start.
absl::Status WaitForAgents(crest::v1::Controller::Stub& stub, int agents) {
  const absl::Time register_deadline = absl::Now() + absl::Seconds(60);
  for (size_t ready = 0; ready < static_cast<size_t>(agents);) {
    if (absl::Now() > register_deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("only ", ready, " of ", agents, " agents registered"));
    }
    absl::SleepFor(absl::Milliseconds(100));
    grpc::ClientContext ctx;
    crest::v1::ListAgentsReply reply;
    if (!stub.ListAgents(&ctx, {}, &reply).ok()) continue;
    ready = static_cast<size_t>(
        std::count_if(reply.agents().begin(), reply.agents().end(),
                      [](const auto& a) { return a.state() == crest::v1::AGENT_READY; }));
  }
  return absl::OkStatus();
}

// Samples the controller (/metrics, /proc) every 500 ms while the campaigns run.
class Sampler {
 public:
  Sampler(std::string metrics_url, pid_t pid, double rss_idle)
      : metrics_url_(std::move(metrics_url)), pid_(pid), rss_max_(rss_idle) {
    thread_ = std::thread([this] {
      while (running_.load()) {
        Scrape s = ScrapeMetrics(metrics_url_);
        max_age_ = std::max(max_age_, s.max_heartbeat_age);
        rss_max_ = std::max(rss_max_, StatusMiB(pid_, "VmRSS"));
        threads_max_ = std::max(threads_max_, Threads(pid_));
        absl::SleepFor(absl::Milliseconds(500));
      }
    });
  }
  ~Sampler() { Stop(); }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  void Stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  // After Stop.
  double max_age() const { return max_age_; }
  double rss_max() const { return rss_max_; }
  int threads_max() const { return threads_max_; }

 private:
  const std::string metrics_url_;
  const pid_t pid_;
  std::atomic<bool> running_{true};
  double max_age_ = 0;
  double rss_max_ = 0;
  int threads_max_ = 0;
  std::thread thread_;
};

absl::StatusOr<std::vector<std::string>> CreateCampaigns(crest::v1::Controller::Stub& stub,
                                                         const Flags& f, const Grid& grid,
                                                         int nodes) {
  std::vector<std::string> ids;
  for (int i = 0; i < f.campaigns; ++i) {
    grpc::ClientContext ctx;
    crest::v1::CreateCampaignRequest req;
    *req.mutable_spec() = SpecFor(f, grid, i, nodes);
    crest::v1::Campaign c;
    grpc::Status s = stub.CreateCampaign(&ctx, req, &c);
    if (!s.ok()) return absl::InternalError(absl::StrCat("CreateCampaign: ", s.error_message()));
    ids.push_back(c.id());
  }
  return ids;
}

// What the operator saw of each campaign until it ended.
struct Watched {
  std::vector<absl::Time> ended;
  std::vector<crest::v1::CampaignState> states;
  uint64_t updates = 0;
};

// An operator watches every campaign until it ends (`crest campaign watch`).
Watched WatchCampaigns(crest::v1::Controller::Stub& stub, const std::vector<std::string>& ids,
                       absl::Duration limit) {
  std::vector<absl::Time> ended(ids.size(), absl::InfinitePast());
  std::vector<crest::v1::CampaignState> states(ids.size());
  std::vector<uint64_t> updates(ids.size(), 0);
  std::vector<std::thread> watchers;
  for (size_t i = 0; i < ids.size(); ++i) {
    watchers.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + limit));
      crest::v1::WatchCampaignRequest req;
      req.set_id(ids[i]);
      auto reader = stub.WatchCampaign(&ctx, req);
      crest::v1::Campaign c;
      while (reader->Read(&c)) {
        ++updates[i];
        states[i] = c.state();
      }
      reader->Finish().IgnoreError();
      ended[i] = absl::Now();
    });
  }
  for (auto& w : watchers) w.join();
  uint64_t all_updates = 0;
  for (uint64_t u : updates) all_updates += u;
  return {std::move(ended), std::move(states), all_updates};
}

// What the campaigns' reports say: trials by status, and what is wrong.
struct Outcome {
  std::map<std::string, int> by_status;
  int64_t ok = 0;
  int64_t trials = 0;
  std::vector<std::string> problems;
};

// Every campaign succeeded, every trial ok and accounted for, no agent lost.
Outcome CheckReports(crest::v1::Controller::Stub& stub, const std::vector<std::string>& ids,
                     const Grid& grid, const Scrape& last) {
  Outcome out;
  for (const std::string& id : ids) {
    grpc::ClientContext ctx;
    crest::v1::GetCampaignReportRequest req;
    req.set_id(id);
    crest::v1::CampaignReport report;
    if (!stub.GetCampaignReport(&ctx, req, &report).ok()) {
      out.problems.push_back(absl::StrCat(id, ": no report"));
      continue;
    }
    if (report.state() != crest::v1::CAMPAIGN_SUCCEEDED) {
      out.problems.push_back(
          absl::StrCat(id, " ended ", crest::v1::CampaignState_Name(report.state())));
    }
    int64_t campaign_ok = 0;
    for (const auto& m : report.models()) {
      for (const auto& t : m.trials()) {
        ++out.trials;
        ++out.by_status[crest::v1::TrialStatus_Name(t.status())];
        campaign_ok += t.status() == crest::v1::TRIAL_OK ? 1 : 0;
      }
    }
    out.ok += campaign_ok;
    if (campaign_ok != grid.trials()) {
      out.problems.push_back(
          absl::StrCat(id, ": ", campaign_ok, " ok trials, expected ", grid.trials()));
    }
  }
  if (out.trials != out.ok)
    out.problems.push_back(absl::StrCat(out.trials - out.ok, " trials not ok"));
  if (!last.ok) out.problems.emplace_back("the controller's /metrics did not answer");
  if (last.lost_total != 0) {
    out.problems.push_back(absl::StrCat("agents declared lost ", last.lost_total, " times"));
  }
  return out;
}

// Why agents were declared lost, in the controller's words (the first few).
std::vector<std::string> LostLines(const std::string& controller_output) {
  std::vector<std::string> lost_lines;
  for (absl::string_view line : absl::StrSplit(controller_output, '\n')) {
    if (absl::StrContains(line, " is lost: ") && lost_lines.size() < 5) {
      lost_lines.emplace_back(line);
    }
  }
  return lost_lines;
}

// The controller's resources over the campaigns (and this process's CPU).
struct Usage {
  double wall = 0;
  double cpu = 0;
  double self_cpu = 0;
  double rss_idle = 0;
  double rss_max = 0;
  double rss_end = 0;
  double hwm = 0;
  int threads_max = 0;
};

// The fleet's side of the heartbeats.
struct Heartbeats {
  uint64_t registrations = 0;
  uint64_t sent = 0;
  const crest::bench::LatencyLog* latency = nullptr;
  double max_age = 0;  // at the controller, sampled
};

void PrintFigures(const Flags& f, const Grid& grid, int nodes, const Watched& watched,
                  const Outcome& outcome, const Usage& u, const Heartbeats& hb,
                  const Scrape& last) {
  std::string statuses;
  for (const auto& [k, v] : outcome.by_status)
    absl::StrAppend(&statuses, statuses.empty() ? "" : ", ", k, " ", v);
  const double wall = u.wall;
  const double cpu = u.cpu;
  const auto ok = static_cast<double>(outcome.ok);
  std::printf(
      "controller-load-bench: %d agents, %d campaigns at once (%d agents each), grid of %lld "
      "points x %u repeats = %lld trials per campaign, fake benchmark %.2f s, heartbeat interval "
      "%.1f s, %u hardware threads\n",
      f.agents, f.campaigns, nodes, static_cast<long long>(grid.points), grid.repeats,
      static_cast<long long>(grid.trials()), f.benchmark_s, f.heartbeat_s,
      std::thread::hardware_concurrency());
  std::printf("| figure | value |\n|---|---|\n");
  std::printf("| campaigns | %zu submitted, %zu succeeded |\n", watched.states.size(),
              static_cast<size_t>(std::count(watched.states.begin(), watched.states.end(),
                                             crest::v1::CAMPAIGN_SUCCEEDED)));
  std::printf("| trials | %lld (%s) in %.1f s |\n", static_cast<long long>(outcome.trials),
              statuses.c_str(), wall);
  std::printf("| trials per minute | %.0f |\n", wall > 0 ? ok * 60 / wall : 0);
  std::printf("| controller CPU (user+sys) | %.1f s, %.0f%% of one core; %.1f ms per trial |\n",
              cpu, wall > 0 ? 100 * cpu / wall : 0, outcome.ok > 0 ? 1000 * cpu / ok : 0);
  std::printf(
      "| controller memory | VmRSS %.1f MiB idle with the agents, %.1f MiB max sampled, %.1f MiB "
      "at the end; VmHWM %.1f MiB |\n",
      u.rss_idle, u.rss_max, u.rss_end, u.hwm);
  std::printf("| controller threads | %d max sampled |\n", u.threads_max);
  std::printf("| this process (fake agents, watchers) CPU | %.1f s, %.0f%% of one core |\n",
              u.self_cpu, wall > 0 ? 100 * u.self_cpu / wall : 0);
  std::printf(
      "| heartbeats | %llu sent; latency p50 %.2f ms, p99 %.2f ms, max %.2f ms (%zu timed) |\n",
      static_cast<unsigned long long>(hb.sent), hb.latency->Quantile(0.5),
      hb.latency->Quantile(0.99), hb.latency->Quantile(1), hb.latency->count());
  std::printf("| heartbeat age at the controller | max %.2f s sampled (lost after %.1f s) |\n",
              hb.max_age, 3 * f.heartbeat_s);
  std::printf("| agents ever declared lost | %.0f (crest_agent_lost_total) |\n", last.lost_total);
  std::printf("| registrations | %llu (%d agents) |\n",
              static_cast<unsigned long long>(hb.registrations), f.agents);
  std::printf("| campaign updates watched | %llu |\n",
              static_cast<unsigned long long>(watched.updates));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "controller-load-bench: the real crest-controller with many fake agents over mutual TLS "
      "and several campaigns at once; prints trials per minute, the controller's CPU and memory, "
      "heartbeat figures and agents declared lost",
      "controller-load-bench");
  Flags f;
  AddFlags(app, f);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  spdlog::set_level(spdlog::level::warn);  // the in-process agents' registrations are noise here
  if (f.campaigns > f.agents) {
    return crest::FailWithMessage(app, "--campaigns must not exceed --agents (one group each)");
  }

  // Every campaign gets the grid of its smallest group, so all are alike.
  const int nodes = f.agents / f.campaigns;
  const Grid grid = GridFor(f, nodes);
  auto curve = SimulatedCurve(f, grid);
  if (!curve.ok()) return Fail(curve.status().ToString());

  crest::e2e::BecomeSubreaper();
  crest::testing::TempDir dir;
  auto ca = crest::testing::TestCa::Create(dir.path(), "load");
  if (!ca.ok()) return Fail(ca.status().ToString());
  auto controller_cert = ca->Issue("crest-controller");
  auto cli_cert = ca->Issue("crest-cli");
  if (!controller_cert.ok() || !cli_cert.ok()) return Fail("cannot issue certificates");
  auto controller = StartController(f, *controller_cert, ca->ca_file(), dir);
  if (!controller.ok()) return Fail(controller.status().ToString());
  Process& ctl = **controller;
  auto port = ctl.WaitForNumberAfter("listening on port ", absl::Seconds(20));
  auto metrics_port = ctl.WaitForNumberAfter("/metrics (port ", absl::Seconds(20));
  if (!port.ok() || !metrics_port.ok()) return Fail("the controller did not start", &ctl);
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  const std::string metrics_url = absl::StrCat("http://127.0.0.1:", *metrics_port, "/metrics");
  auto operator_stub = OperatorStub(address, *cli_cert, ca->ca_file());
  if (!operator_stub.ok()) return Fail(operator_stub.status().ToString());
  crest::v1::Controller::Stub& stub = **operator_stub;
  auto fleet = Fleet::Start(FleetOptionsFor(f, address, &*ca, *curve));
  if (!fleet.ok()) return Fail(fleet.status().ToString(), &ctl);
  if (absl::Status ready = WaitForAgents(stub, f.agents); !ready.ok()) {
    return Fail(std::string(ready.message()), &ctl);
  }

  const pid_t pid = ctl.pid();
  Usage usage;
  usage.rss_idle = StatusMiB(pid, "VmRSS");
  const double cpu0 = CpuSeconds(pid);
  const double self_cpu0 = SelfCpuSeconds();
  const absl::Time t0 = absl::Now();
  Sampler sampler(metrics_url, pid, usage.rss_idle);
  auto ids = CreateCampaigns(stub, f, grid, nodes);
  if (!ids.ok()) {
    sampler.Stop();
    return Fail(std::string(ids.status().message()), &ctl);
  }
  const Watched watched =
      WatchCampaigns(stub, *ids, absl::Seconds(std::max(120.0, 20 * f.duration_s)));
  const absl::Time t1 = *std::max_element(watched.ended.begin(), watched.ended.end());
  usage.cpu = CpuSeconds(pid) - cpu0;
  usage.self_cpu = SelfCpuSeconds() - self_cpu0;
  usage.wall = absl::ToDoubleSeconds(t1 - t0);
  sampler.Stop();
  usage.rss_max = sampler.rss_max();
  usage.threads_max = sampler.threads_max();
  usage.rss_end = StatusMiB(pid, "VmRSS");
  usage.hwm = StatusMiB(pid, "VmHWM");
  const Scrape last = ScrapeMetrics(metrics_url);

  const Outcome outcome = CheckReports(stub, *ids, grid, last);
  const std::vector<std::string> lost_lines = LostLines(ctl.output());
  Heartbeats hb;
  hb.registrations = (*fleet)->registrations();
  hb.sent = (*fleet)->heartbeats();
  hb.latency = &(*fleet)->heartbeat_latency();
  hb.max_age = std::max(sampler.max_age(), last.max_heartbeat_age);
  (*fleet)->Stop();
  ctl.Terminate(absl::Seconds(10));
  crest::e2e::KillAllChildren();

  PrintFigures(f, grid, nodes, watched, outcome, usage, hb, last);
  if (!outcome.problems.empty()) {
    for (const auto& p : outcome.problems) std::printf("FAILED: %s\n", p.c_str());
    for (const auto& l : lost_lines) std::printf("  controller: %s\n", l.c_str());
    return 1;
  }
  std::printf("OK: every campaign succeeded, every trial ok, no agent declared lost\n");
  return 0;
}
