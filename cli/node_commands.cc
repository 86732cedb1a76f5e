// `crest node ...`: calls one crest-agent directly, so an operator can run a
// trial by hand: info, tune, restore, start, stop, status, bench. Human output
// by default, --output json for scripts. Every RPC has a deadline; every error
// is one line on stderr and a non-zero exit.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

#include "common/command_line.h"
#include "common/status.h"
#include "common/tls.h"
#include "crest/v1/agent.grpc.pb.h"

namespace crest::cli {
namespace {

using google::protobuf::util::TimeUtil;

struct NodeFlags {
  std::string agent;
  TlsOptions tls;
  std::string tls_server_name;
  std::string output = "text";
  double timeout_s = 0;  // 0: the command's default
  uint32_t slot = 0;     // the daemon slot addressed (agent `slots:`)
};

struct StartFlags {
  std::vector<std::string> sets;
  std::string pin = "none";
  bool replace = false;
  double start_timeout_s = 0;
  bool stream_log = false;
};

struct BenchCliFlags {
  uint32_t concurrency = 128;
  double request_rate = 0;
  uint32_t request_count = 0;
  uint32_t max_output_len = 20;
  std::string dataset_type = "gsm8k";
  std::string dataset_name;
  uint32_t synthetic_input_len = 0;
  std::string task_kind = "stream";
  std::string api = "mindie";
  std::string model_name;
  std::string distribution = "poisson";
  uint32_t warmup = 0;
  double request_timeout_s = 600;
  double duration_s = 0;
  uint64_t seed = 0;
};

// Proto JSON with 64-bit counters as numbers (protobuf writes int64 as
// strings), so scripts can compare npuBlockNum or restarts directly.
std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(out, nullptr, false);
  if (j.is_discarded()) return out + "\n";
  for (const char* key : {"npuBlockNum", "restarts", "succeeded", "failed", "inputTokens",
                          "outputTokens", "hbmTotalMib", "hbmUsedMib"}) {
    if (j.contains(key) && j[key].is_string()) {
      int64_t v = 0;
      if (absl::SimpleAtoi(j[key].get<std::string>(), &v)) j[key] = v;
    }
  }
  return j.dump(2) + "\n";
}

std::string GrpcError(const std::string& what, const grpc::Status& s, const std::string& agent) {
  std::string code;
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = "invalid argument";
      break;
    case grpc::StatusCode::FAILED_PRECONDITION:
      code = "refused";
      break;
    case grpc::StatusCode::UNAVAILABLE:
      code = absl::StrCat("agent ", agent, " unreachable");
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = "deadline exceeded";
      break;
    default:
      code = absl::StrCat("error ", static_cast<int>(s.error_code()));
  }
  std::string msg = s.error_message();
  for (char& c : msg) {
    if (c == '\n') c = ' ';
  }
  return absl::StrCat(what, ": ", code, ": ", msg);
}

absl::StatusOr<std::unique_ptr<crest::v1::NodeAgent::Stub>> Connect(const NodeFlags& f) {
  if (f.agent.empty()) return absl::InvalidArgumentError("--agent: required (host:port)");
  if (f.output != "text" && f.output != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--output: \"", f.output, "\" is not text or json"));
  }
  TlsOptions tls = f.tls;
  tls.server_name_override = f.tls_server_name;
  CREST_ASSIGN_OR_RETURN(auto channel, MakeChannel(f.agent, tls));
  return crest::v1::NodeAgent::NewStub(channel);
}

void SetDeadline(grpc::ClientContext& ctx, const NodeFlags& f, double default_s) {
  double s = f.timeout_s > 0 ? f.timeout_s : default_s;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(s * 1000)));
}

void AddCommon(CLI::App* cmd, NodeFlags* f) {
  cmd->add_option("--agent", f->agent, "Agent address (host:port)")->required();
  AddTlsFlags(*cmd, f->tls);
  cmd->add_option("--tls-server-name", f->tls_server_name,
                  "Name expected in the agent's certificate (default: the dialled host)")
      ->group("Security");
  cmd->add_option("--output", f->output, "text | json")->capture_default_str();
  cmd->add_option("--timeout", f->timeout_s, "Deadline of the call in seconds");
}

// For the commands on one daemon: which of the agent's slots.
void AddSlot(CLI::App* cmd, NodeFlags* f) {
  cmd->add_option("--slot", f->slot,
                  "The daemon slot (`crest node info` lists them; 0 on an agent without slots)")
      ->capture_default_str();
}

void PrintHost(const crest::v1::HostState& h) {
  auto support = [](crest::v1::SettingSupport s) {
    return s == crest::v1::SETTING_UNSUPPORTED ? " (unsupported)" : "";
  };
  std::cout << "governor: " << (h.governor().empty() ? "-" : h.governor())
            << support(h.governor_support()) << "\n"
            << "thp:      " << (h.thp().empty() ? "-" : h.thp()) << support(h.thp_support()) << "\n"
            << "tuned:    " << (h.tuned() ? "yes (previous state recorded)" : "no") << "\n";
}

int Info(const NodeFlags& f) {
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, 30);
  crest::v1::NodeInfo info;
  grpc::Status s = (*stub)->GetNodeInfo(&ctx, {}, &info);
  if (!s.ok()) return Fail(GrpcError("node info", s, f.agent));
  if (f.output == "json") {
    std::cout << ToJson(info);
    return 0;
  }
  std::cout << "node:     " << info.node_name() << " (agent " << info.agent_version()
            << ", backend " << info.backend() << ")\n";
  std::cout << "cpus:     " << info.cpu_count() << " possible, " << info.online_cpus_size()
            << " online\n";
  for (const auto& n : info.numa_nodes()) {
    std::cout << "numa " << n.id() << ":   " << n.cpu_list() << "\n";
  }
  if (info.npus().empty()) std::cout << "npus:     none (" << info.npu_note() << ")\n";
  for (const auto& d : info.npus()) {
    std::cout << "npu " << d.id() << ":    " << d.name() << " " << d.health() << " HBM "
              << d.hbm_used_mib() << "/" << d.hbm_total_mib() << " MiB\n";
  }
  for (const auto& slot : info.slots()) {
    std::cout << "slot " << slot.index() << ":   npus " << absl::StrJoin(slot.npus(), ",")
              << ", cpus " << (slot.cpu_list().empty() ? "not pinned" : slot.cpu_list())
              << ", port " << slot.port() << ", daemon "
              << crest::v1::DaemonState_Name(slot.daemon().state()) << "\n";
  }
  if (info.slots_size() > 0) {
    std::cout << "slot cpu: " << info.slot_cpu_rule()
              << (info.slot_cpu_note().empty() ? "" : " (" + info.slot_cpu_note() + ")") << "\n";
  }
  PrintHost(info.host());
  for (const auto& [k, v] : info.labels()) std::cout << "label:    " << k << "=" << v << "\n";
  return 0;
}

void PrintTuning(const crest::v1::HostTuningReply& reply) {
  for (const auto& r : reply.results()) {
    std::cout << r.setting() << ": "
              << (r.support() == crest::v1::SETTING_UNSUPPORTED
                      ? "unsupported"
                      : absl::StrCat(r.previous(), " -> ", r.current()))
              << (r.message().empty() ? "" : "  (" + r.message() + ")") << "\n";
  }
  if (reply.results().empty()) std::cout << "nothing recorded; nothing to restore\n";
}

int Tune(const NodeFlags& f, const std::string& governor, const std::string& thp) {
  if (governor.empty() && thp.empty()) return Fail("tune: give --governor and/or --thp");
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, 60);
  crest::v1::ApplyHostTuningRequest req;
  req.set_governor(governor);
  req.set_thp(thp);
  crest::v1::HostTuningReply reply;
  grpc::Status s = (*stub)->ApplyHostTuning(&ctx, req, &reply);
  if (!s.ok()) return Fail(GrpcError("node tune", s, f.agent));
  if (f.output == "json") {
    std::cout << ToJson(reply);
  } else {
    PrintTuning(reply);
  }
  return 0;
}

int Restore(const NodeFlags& f) {
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, 60);
  crest::v1::HostTuningReply reply;
  grpc::Status s = (*stub)->RestoreHostTuning(&ctx, {}, &reply);
  if (!s.ok()) return Fail(GrpcError("node restore", s, f.agent));
  if (f.output == "json") {
    std::cout << ToJson(reply);
  } else {
    PrintTuning(reply);
  }
  return 0;
}

absl::StatusOr<crest::v1::ConfigOverride> ParseSet(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--set \"", text, "\": expected KEY=VALUE"));
  }
  crest::v1::ConfigOverride o;
  o.set_key(text.substr(0, eq));
  std::string value = text.substr(eq + 1);
  std::string lower = absl::AsciiStrToLower(value);
  int64_t i = 0;
  double d = 0;
  if (lower == "true" || lower == "false") {
    o.set_bool_value(lower == "true");
  } else if (absl::SimpleAtoi(value, &i)) {
    o.set_int_value(i);
  } else if (absl::SimpleAtod(value, &d) && std::isfinite(d)) {
    o.set_double_value(d);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--set ", o.key(), "=\"", value, "\": expected an integer, a number, true or false"));
  }
  return o;
}

absl::StatusOr<crest::v1::PinningPolicy> ParsePin(const std::string& pin) {
  crest::v1::PinningPolicy p;
  if (pin == "none") {
    p.set_mode(crest::v1::PINNING_NONE);
  } else if (pin == "odd-numa") {
    p.set_mode(crest::v1::PINNING_ODD_NUMA);
  } else if (!pin.empty() && absl::ascii_isdigit(static_cast<unsigned char>(pin[0]))) {
    p.set_mode(crest::v1::PINNING_CPU_LIST);
    p.set_cpu_list(pin);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--pin \"", pin, "\": expected odd-numa, none or a CPU list such as 24-47"));
  }
  return p;
}

int Start(const NodeFlags& f, const StartFlags& sf) {
  crest::v1::StartDaemonRequest req;
  req.set_slot(f.slot);
  for (const std::string& set : sf.sets) {
    auto o = ParseSet(set);
    if (!o.ok()) return Fail(std::string(o.status().message()));
    *req.add_overrides() = *o;
  }
  auto pin = ParsePin(sf.pin);
  if (!pin.ok()) return Fail(std::string(pin.status().message()));
  *req.mutable_pinning() = *pin;
  req.set_replace_running(sf.replace);
  req.set_stream_log(sf.stream_log);
  if (sf.start_timeout_s < 0) return Fail("--start-timeout: expected seconds > 0");
  if (sf.start_timeout_s > 0) {
    *req.mutable_start_timeout() =
        TimeUtil::NanosecondsToDuration(static_cast<int64_t>(sf.start_timeout_s * 1e9));
  }
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, sf.start_timeout_s > 0 ? sf.start_timeout_s + 60 : 900);
  auto reader = (*stub)->StartDaemon(&ctx, req);
  crest::v1::DaemonEvent event;
  std::optional<crest::v1::DaemonEvent> last;
  while (reader->Read(&event)) {
    if (event.has_starting() && f.output == "text") {
      std::cout << "starting: pid " << event.starting().pid() << ", pinned to "
                << (event.starting().pinned_cpu_list().empty() ? "nothing"
                                                               : event.starting().pinned_cpu_list())
                << std::endl;
    }
    if (event.has_log_line() && f.output == "text") {
      std::cout << "  | " << event.log_line().line() << "\n";
    }
    if (event.has_ready() || event.has_failed()) last = event;
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Fail(GrpcError("node start", s, f.agent));
  if (!last) return Fail("node start: the agent ended the stream without READY or FAILED");
  if (last->has_failed()) {
    const crest::v1::DaemonFailed& failed = last->failed();
    if (f.output == "json") {
      std::cout << ToJson(failed);
    } else {
      for (const std::string& line : failed.log_tail()) std::cerr << "  | " << line << "\n";
    }
    return Fail(absl::StrCat("node start: daemon failed (",
                             crest::v1::DaemonFailure_Name(failed.kind()), "): ", failed.reason()));
  }
  const crest::v1::DaemonReady& ready = last->ready();
  if (f.output == "json") {
    std::cout << ToJson(ready);
    return 0;
  }
  std::cout << "ready: pid " << ready.pid() << ", npuBlockNum " << ready.npu_block_num()
            << ", pinned to "
            << (ready.pinned_cpu_list().empty() ? "nothing" : ready.pinned_cpu_list()) << ", after "
            << TimeUtil::DurationToMilliseconds(ready.startup_time()) / 1000.0 << " s\n"
            << "business:   " << ready.business_url() << "\n"
            << "management: " << ready.management_url() << "\n";
  for (const auto& o : ready.effective()) {
    std::cout << "  " << o.key() << " = "
              << (o.value_case() == crest::v1::ConfigOverride::kBoolValue
                      ? (o.bool_value() ? "true" : "false")
                  : o.value_case() == crest::v1::ConfigOverride::kIntValue
                      ? absl::StrCat(o.int_value())
                      : absl::StrCat(o.double_value()))
              << "\n";
  }
  return 0;
}

int Stop(const NodeFlags& f, double grace_s) {
  if (grace_s < 0) return Fail("--grace: expected seconds >= 0");
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  crest::v1::StopDaemonRequest req;
  req.set_slot(f.slot);
  if (grace_s > 0) {
    *req.mutable_grace() = TimeUtil::NanosecondsToDuration(static_cast<int64_t>(grace_s * 1e9));
  }
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, grace_s + 90);
  crest::v1::StopDaemonReply reply;
  grpc::Status s = (*stub)->StopDaemon(&ctx, req, &reply);
  if (!s.ok()) return Fail(GrpcError("node stop", s, f.agent));
  if (f.output == "json") {
    std::cout << ToJson(reply);
  } else if (!reply.was_running()) {
    std::cout << "no daemon was running\n";
  } else {
    std::cout << "stopped (exit code " << reply.exit_code() << (reply.killed() ? ", SIGKILL" : "")
              << ")\n";
  }
  return 0;
}

int Status(const NodeFlags& f) {
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, 10);
  crest::v1::GetDaemonStatusRequest req;
  req.set_slot(f.slot);
  crest::v1::DaemonStatus reply;
  grpc::Status s = (*stub)->GetDaemonStatus(&ctx, req, &reply);
  if (!s.ok()) return Fail(GrpcError("node status", s, f.agent));
  if (f.output == "json") {
    std::cout << ToJson(reply);
    return 0;
  }
  std::cout << "state: " << crest::v1::DaemonState_Name(reply.state()) << "\n";
  if (reply.pid() != 0) {
    std::cout << "pid " << reply.pid() << ", npuBlockNum " << reply.npu_block_num()
              << ", pinned to "
              << (reply.pinned_cpu_list().empty() ? "nothing" : reply.pinned_cpu_list()) << "\n";
  }
  if (reply.has_last_failure())
    std::cout << "last failure: " << reply.last_failure().reason() << "\n";
  return 0;
}

absl::StatusOr<crest::v1::BenchmarkSpec> MakeSpec(const BenchCliFlags& b) {
  crest::v1::BenchmarkSpec spec;
  std::string api = absl::AsciiStrToLower(b.api);
  if (api == "mindie") {
    spec.set_api(crest::v1::BENCHMARK_API_MINDIE);
  } else if (api == "openai") {
    spec.set_api(crest::v1::BENCHMARK_API_OPENAI);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--api \"", b.api, "\": expected mindie or openai"));
  }
  std::string kind = absl::AsciiStrToLower(b.task_kind);
  if (kind == "stream") {
    spec.set_task_kind(crest::v1::TASK_KIND_STREAM);
  } else if (kind == "text") {
    spec.set_task_kind(crest::v1::TASK_KIND_TEXT);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--TaskKind \"", b.task_kind, "\": expected stream or text"));
  }
  std::string type = absl::AsciiStrToLower(b.dataset_type);
  crest::v1::DatasetSpec* ds = spec.mutable_dataset();
  if (type == "gsm8k") {
    ds->set_type(crest::v1::DATASET_TYPE_GSM8K);
  } else if (type == "jsonl") {
    ds->set_type(crest::v1::DATASET_TYPE_JSONL);
  } else if (type == "synthetic") {
    ds->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
    ds->set_synthetic_input_tokens(b.synthetic_input_len);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--DatasetType \"", b.dataset_type, "\": expected gsm8k, jsonl or synthetic"));
  }
  ds->set_name(b.dataset_name);
  std::string dist = absl::AsciiStrToLower(b.distribution);
  if (dist == "poisson") {
    spec.set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_POISSON);
  } else if (dist == "constant" || dist == "uniform") {
    spec.set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--Distribution \"", b.distribution, "\": expected poisson or constant"));
  }
  if (b.request_rate < 0 || !std::isfinite(b.request_rate)) {
    return absl::InvalidArgumentError("--RequestRate: expected a number >= 0");
  }
  spec.set_model_name(b.model_name);
  spec.set_concurrency(b.concurrency);
  spec.set_request_rate(b.request_rate);
  spec.set_request_count(b.request_count);
  spec.set_max_output_len(b.max_output_len);
  spec.set_warmup_requests(b.warmup);
  spec.set_seed(b.seed);
  if (b.request_timeout_s <= 0) return absl::InvalidArgumentError("--RequestTimeOut: expected > 0");
  *spec.mutable_request_timeout() =
      TimeUtil::NanosecondsToDuration(static_cast<int64_t>(b.request_timeout_s * 1e9));
  if (b.duration_s < 0) return absl::InvalidArgumentError("--Duration: expected >= 0");
  if (b.duration_s > 0) {
    *spec.mutable_max_duration() =
        TimeUtil::NanosecondsToDuration(static_cast<int64_t>(b.duration_s * 1e9));
  }
  return spec;
}

int Bench(const NodeFlags& f, const BenchCliFlags& b) {
  auto spec = MakeSpec(b);
  if (!spec.ok()) return Fail(std::string(spec.status().message()));
  auto stub = Connect(f);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  crest::v1::RunBenchmarkRequest req;
  req.set_slot(f.slot);
  *req.mutable_spec() = *spec;
  grpc::ClientContext ctx;
  SetDeadline(ctx, f, 3600);
  auto reader = (*stub)->RunBenchmark(&ctx, req);
  crest::v1::BenchmarkEvent event;
  std::optional<crest::v1::BenchmarkResult> result;
  while (reader->Read(&event)) {
    if (event.has_progress() && f.output == "text") {
      const auto& p = event.progress();
      std::cerr << "\rprogress: " << p.requests_done() << "/" << p.requests_total() << " done, "
                << p.requests_failed() << " failed, " << static_cast<int64_t>(p.tokens_per_second())
                << " tokens/s   " << std::flush;
    }
    if (event.has_result()) result = event.result();
  }
  if (f.output == "text") std::cerr << "\n";
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Fail(GrpcError("node bench", s, f.agent));
  if (!result) return Fail("node bench: the agent ended the stream without a result");
  if (f.output == "json") {
    std::cout << ToJson(*result);
    return 0;
  }
  std::cout << "GenerateSpeed:          " << result->generate_speed() << " token/s\n"
            << "GenerateSpeedPerClient: " << result->generate_speed_per_client() << " token/s\n"
            << "Throughput:             " << result->qps() << " req/s\n"
            << "FirstTokenTime avg:     " << result->first_token_time().average_ms() << " ms\n"
            << "DecodeTime avg:         " << result->decode_time().average_ms() << " ms\n"
            << "Returned / Failed:      " << result->succeeded() << " / " << result->failed()
            << "\n";
  return 0;
}

}  // namespace

void AddNodeCommands(CLI::App& crest, Action* action) {
  CLI::App* group = crest.add_subcommand("node", "Call one node agent directly");
  group->require_subcommand(1);
  // The flag storage lives as long as the app (the action runs after parsing).
  auto flags = std::make_shared<NodeFlags>();

  CLI::App* info = group->add_subcommand("info", "CPUs, NUMA nodes, NPUs and host state");
  AddCommon(info, flags.get());
  info->callback([action, flags] { *action = [flags] { return Info(*flags); }; });

  auto governor = std::make_shared<std::string>();
  auto thp = std::make_shared<std::string>();
  CLI::App* tune = group->add_subcommand("tune", "Set the CPU governor and/or THP mode");
  AddCommon(tune, flags.get());
  tune->add_option("--governor", *governor, "CPU frequency governor, e.g. performance");
  tune->add_option("--thp", *thp, "Transparent hugepages: always | madvise | never");
  tune->callback([action, flags, governor, thp] {
    *action = [flags, governor, thp] { return Tune(*flags, *governor, *thp); };
  });

  CLI::App* restore = group->add_subcommand("restore", "Put back the host state before tuning");
  AddCommon(restore, flags.get());
  restore->callback([action, flags] { *action = [flags] { return Restore(*flags); }; });

  auto sf = std::make_shared<StartFlags>();
  CLI::App* start =
      group->add_subcommand("start", "Start the daemon with ScheduleConfig overrides");
  AddCommon(start, flags.get());
  AddSlot(start, flags.get());
  start->add_option("--set", sf->sets,
                    "ScheduleConfig KEY=VALUE (repeatable), e.g. maxBatchSize=400");
  start->add_option("--pin", sf->pin, "odd-numa | none | CPU list (e.g. 24-47,72-95)")
      ->capture_default_str();
  start->add_flag("--replace", sf->replace, "Stop a running daemon first instead of refusing");
  start->add_option("--start-timeout", sf->start_timeout_s,
                    "Start-up deadline in seconds (capped by the agent's config)");
  start->add_flag("--stream-log", sf->stream_log, "Print the daemon's log lines while it starts");
  start->callback([action, flags, sf] { *action = [flags, sf] { return Start(*flags, *sf); }; });

  auto grace = std::make_shared<double>(0);
  CLI::App* stop = group->add_subcommand("stop", "Stop the daemon (SIGTERM, grace, SIGKILL)");
  AddCommon(stop, flags.get());
  AddSlot(stop, flags.get());
  stop->add_option("--grace", *grace, "Seconds between SIGTERM and SIGKILL (default: agent's)");
  stop->callback(
      [action, flags, grace] { *action = [flags, grace] { return Stop(*flags, *grace); }; });

  CLI::App* status = group->add_subcommand("status", "The daemon's state");
  AddCommon(status, flags.get());
  AddSlot(status, flags.get());
  status->callback([action, flags] { *action = [flags] { return Status(*flags); }; });

  auto b = std::make_shared<BenchCliFlags>();
  CLI::App* bench =
      group->add_subcommand("bench", "Run crest-bench on the node against its daemon");
  AddCommon(bench, flags.get());
  AddSlot(bench, flags.get());
  bench->add_option("--Concurrency,--concurrency", b->concurrency, "Requests in flight at most")
      ->capture_default_str();
  bench->add_option("--RequestRate,--request-rate", b->request_rate,
                    "Requests per second (0: concurrency mode)");
  bench->add_option("--RequestCount,--request-count", b->request_count,
                    "Measured requests (0: the dataset once)");
  bench
      ->add_option("--MaxOutputLen,--max-output-len", b->max_output_len,
                   "Generated tokens per request at most")
      ->capture_default_str();
  bench->add_option("--DatasetType,--dataset-type", b->dataset_type, "gsm8k | jsonl | synthetic")
      ->capture_default_str();
  bench->add_option("--DatasetName,--dataset-name", b->dataset_name,
                    "A dataset the agent has (by name, never a path)");
  bench->add_option("--SyntheticInputLen,--synthetic-input-len", b->synthetic_input_len,
                    "synthetic: tokens per prompt");
  bench->add_option("--TaskKind,--task-kind", b->task_kind, "stream | text")->capture_default_str();
  bench->add_option("--api", b->api, "mindie | openai")->capture_default_str();
  bench->add_option("--ModelName,--model-name", b->model_name,
                    "Model name in requests (default: the daemon's)");
  bench->add_option("--Distribution,--distribution", b->distribution, "poisson | constant")
      ->capture_default_str();
  bench->add_option("--WarmupRequests,--warmup-requests,--WarmupSize,--warmup-size", b->warmup,
                    "Requests sent and discarded first");
  bench
      ->add_option("--RequestTimeOut,--request-timeout", b->request_timeout_s,
                   "Seconds before a request counts as failed")
      ->capture_default_str();
  bench->add_option("--Duration,--duration", b->duration_s, "Stop sending after this many seconds");
  bench->add_option("--seed,--Seed", b->seed, "Seed for prompt order and arrival gaps");
  bench->callback([action, flags, b] { *action = [flags, b] { return Bench(*flags, *b); }; });
}

}  // namespace crest::cli
