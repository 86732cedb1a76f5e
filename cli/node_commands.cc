// `crest node ...`: calls one crest-agent directly, so an operator can run a
// trial by hand: info, tune, restore, start, stop, status, bench. Human output
// by default, --output json for scripts. Every RPC has a deadline; every error
// is one line on stderr and a non-zero exit. The requests are built by
// node_requests, the replies printed by node_output; each command here only
// makes its call.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/node_output.h"
#include "cli/node_requests.h"
#include "cli/rpc_client.h"

#include "crest/v1/agent.grpc.pb.h"

namespace crest::cli {
namespace {

using crest::v1::NodeAgent;

// The flags every `crest node` command has.
struct NodeFlags {
  Endpoint endpoint{kAgentPeer};
  OutputFormat output = OutputFormat::kText;
  uint32_t slot = 0;  // the daemon slot addressed (agent `slots:`)
};

// One unary call, its reply printed as JSON or as `text` says.
template <typename Request, typename Reply>
int PrintNodeCall(const NodeFlags& f, std::string call, absl::Duration timeout,
                  RpcClient<NodeAgent>::Method<Request, Reply> method, const Request& request,
                  std::string (*text)(const Reply&)) {
  auto client = RpcClient<NodeAgent>::Open(f.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  absl::StatusOr<Reply> reply = client->Call(std::move(call), timeout, method, request);
  if (!reply.ok()) return Fail(reply.status().message());
  std::cout << (f.output == OutputFormat::kJson ? ProtoJson(*reply) : text(*reply));
  return 0;
}

int Tune(const NodeFlags& f, const std::string& governor, const std::string& thp) {
  if (governor.empty() && thp.empty()) return Fail("tune: give --governor and/or --thp");
  crest::v1::ApplyHostTuningRequest req;
  req.set_governor(governor);
  req.set_thp(thp);
  return PrintNodeCall(f, "node tune", kChangeTimeout, &NodeAgent::Stub::ApplyHostTuning, req,
                       &HostTuningText);
}

int Start(const NodeFlags& f, const StartFlags& sf) {
  auto req = MakeStartRequest(f.slot, sf);
  if (!req.ok()) return Fail(req.status().message());
  auto client = RpcClient<NodeAgent>::Open(f.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  RpcCall call(f.endpoint, "node start", StartCallTimeout(sf));
  auto reader = client->stub().StartDaemon(call.context(), *req);
  const bool json = f.output == OutputFormat::kJson;
  crest::v1::DaemonEvent event;
  std::optional<crest::v1::DaemonEvent> last;
  while (reader->Read(&event)) {
    if (event.has_starting() && !json) {
      std::cout << DaemonStartingText(event.starting()) << std::flush;
    }
    if (event.has_log_line() && !json) std::cout << "  | " << event.log_line().line() << "\n";
    if (event.has_ready() || event.has_failed()) last = event;
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return call.Fail(s);
  if (!last) return Fail("node start: the agent ended the stream without READY or FAILED");
  if (last->has_failed()) {
    const crest::v1::DaemonFailed& failed = last->failed();
    if (json) {
      std::cout << ProtoJson(failed);
    } else {
      for (const std::string& line : failed.log_tail()) std::cerr << "  | " << line << "\n";
    }
    return Fail(absl::StrCat("node start: daemon failed (",
                             crest::v1::DaemonFailure_Name(failed.kind()), "): ", failed.reason()));
  }
  std::cout << (json ? ProtoJson(last->ready()) : DaemonReadyText(last->ready()));
  return 0;
}

int Stop(const NodeFlags& f, double grace_s) {
  auto req = MakeStopRequest(f.slot, grace_s);
  if (!req.ok()) return Fail(req.status().message());
  return PrintNodeCall(f, "node stop", StopCallTimeout(grace_s), &NodeAgent::Stub::StopDaemon, *req,
                       &DaemonStopText);
}

int Bench(const NodeFlags& f, const BenchFlags& b) {
  auto spec = MakeBenchmarkSpec(b);
  if (!spec.ok()) return Fail(spec.status().message());
  auto client = RpcClient<NodeAgent>::Open(f.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  crest::v1::RunBenchmarkRequest req;
  req.set_slot(f.slot);
  *req.mutable_spec() = *spec;
  RpcCall call(f.endpoint, "node bench", kBenchmarkTimeout);
  auto reader = client->stub().RunBenchmark(call.context(), req);
  const bool json = f.output == OutputFormat::kJson;
  crest::v1::BenchmarkEvent event;
  std::optional<crest::v1::BenchmarkResult> result;
  while (reader->Read(&event)) {
    if (event.has_progress() && !json) {
      std::cerr << BenchmarkProgressText(event.progress()) << std::flush;
    }
    if (event.has_result()) result = event.result();
  }
  if (!json) std::cerr << "\n";
  grpc::Status s = reader->Finish();
  if (!s.ok()) return call.Fail(s);
  if (!result) return Fail("node bench: the agent ended the stream without a result");
  std::cout << (json ? ProtoJson(*result) : BenchmarkResultText(*result));
  return 0;
}

// A `crest node` subcommand with the common flags (and --slot for the
// commands on one daemon) bound to `f`.
CLI::App* AddNodeCommand(CLI::App* group, const std::string& name, const std::string& help,
                         NodeFlags* f, absl::Duration default_timeout, bool one_daemon) {
  CLI::App* cmd = group->add_subcommand(name, help);
  AddEndpointFlags(*cmd, &f->endpoint, default_timeout);
  AddOutputFlag(*cmd, &f->output);
  if (one_daemon) {
    cmd->add_option("--slot", f->slot,
                    "The daemon slot (`crest node info` lists them; 0 on an agent without slots)")
        ->capture_default_str();
  }
  return cmd;
}

}  // namespace

void AddNodeCommands(CLI::App& crest, Action* action) {
  CLI::App* group = crest.add_subcommand("node", "Call one node agent directly");
  group->require_subcommand(1);
  // The flag storage lives as long as the app (the action runs after parsing).
  auto f = std::make_shared<NodeFlags>();

  AddNodeCommand(group, "info", "CPUs, NUMA nodes, NPUs and host state", f.get(), kQueryTimeout,
                 false)
      ->callback([action, f] {
        *action = [f] {
          return PrintNodeCall(*f, "node info", kQueryTimeout, &NodeAgent::Stub::GetNodeInfo,
                               crest::v1::GetNodeInfoRequest(), &NodeInfoText);
        };
      });

  auto governor = std::make_shared<std::string>();
  auto thp = std::make_shared<std::string>();
  CLI::App* tune = AddNodeCommand(group, "tune", "Set the CPU governor and/or THP mode", f.get(),
                                  kChangeTimeout, false);
  tune->add_option("--governor", *governor, "CPU frequency governor, e.g. performance");
  tune->add_option("--thp", *thp, "Transparent hugepages: always | madvise | never");
  tune->callback([action, f, governor, thp] {
    *action = [f, governor, thp] { return Tune(*f, *governor, *thp); };
  });

  AddNodeCommand(group, "restore", "Put back the host state before tuning", f.get(), kChangeTimeout,
                 false)
      ->callback([action, f] {
        *action = [f] {
          return PrintNodeCall(*f, "node restore", kChangeTimeout,
                               &NodeAgent::Stub::RestoreHostTuning,
                               crest::v1::RestoreHostTuningRequest(), &HostTuningText);
        };
      });

  auto sf = std::make_shared<StartFlags>();
  CLI::App* start = AddNodeCommand(group, "start", "Start the daemon with ScheduleConfig overrides",
                                   f.get(), kDaemonStartTimeout, true);
  AddStartFlags(*start, sf.get());
  start->callback([action, f, sf] { *action = [f, sf] { return Start(*f, *sf); }; });

  auto grace = std::make_shared<double>(0);
  CLI::App* stop = AddNodeCommand(group, "stop", "Stop the daemon (SIGTERM, grace, SIGKILL)",
                                  f.get(), kDaemonStopMargin, true);
  stop->add_option("--grace", *grace, "Seconds between SIGTERM and SIGKILL (default: agent's)");
  stop->callback([action, f, grace] { *action = [f, grace] { return Stop(*f, *grace); }; });

  AddNodeCommand(group, "status", "The daemon's state", f.get(), kQueryTimeout, true)
      ->callback([action, f] {
        *action = [f] {
          crest::v1::GetDaemonStatusRequest req;
          req.set_slot(f->slot);
          return PrintNodeCall(*f, "node status", kQueryTimeout, &NodeAgent::Stub::GetDaemonStatus,
                               req, &DaemonStatusText);
        };
      });

  auto b = std::make_shared<BenchFlags>();
  CLI::App* bench = AddNodeCommand(group, "bench", "Run crest-bench on the node against its daemon",
                                   f.get(), kBenchmarkTimeout, true);
  AddBenchFlags(*bench, b.get());
  bench->callback([action, f, b] { *action = [f, b] { return Bench(*f, *b); }; });
}

}  // namespace crest::cli
