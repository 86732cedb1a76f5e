#include "cli/node_output.h"

#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

namespace crest::cli {
namespace {

using google::protobuf::util::TimeUtil;

std::string PinnedTo(const std::string& cpu_list) {
  return cpu_list.empty() ? "nothing" : cpu_list;
}

std::string OverrideValue(const crest::v1::ConfigOverride& o) {
  switch (o.value_case()) {
    case crest::v1::ConfigOverride::kBoolValue:
      return o.bool_value() ? "true" : "false";
    case crest::v1::ConfigOverride::kIntValue:
      return absl::StrCat(o.int_value());
    case crest::v1::ConfigOverride::kDoubleValue:
    case crest::v1::ConfigOverride::VALUE_NOT_SET:
      break;
  }
  return absl::StrCat(o.double_value());
}

void AppendHost(std::ostringstream& out, const crest::v1::HostState& h) {
  auto support = [](crest::v1::SettingSupport s) {
    return s == crest::v1::SETTING_UNSUPPORTED ? " (unsupported)" : "";
  };
  out << "governor: " << (h.governor().empty() ? "-" : h.governor())
      << support(h.governor_support()) << "\n"
      << "thp:      " << (h.thp().empty() ? "-" : h.thp()) << support(h.thp_support()) << "\n"
      << "tuned:    " << (h.tuned() ? "yes (previous state recorded)" : "no") << "\n";
}

}  // namespace

std::string ProtoJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
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

std::string NodeInfoText(const crest::v1::NodeInfo& info) {
  std::ostringstream out;
  out << "node:     " << info.node_name() << " (agent " << info.agent_version() << ", backend "
      << info.backend() << ")\n";
  out << "cpus:     " << info.cpu_count() << " possible, " << info.online_cpus_size()
      << " online\n";
  for (const auto& n : info.numa_nodes())
    out << "numa " << n.id() << ":   " << n.cpu_list() << "\n";
  if (info.npus().empty()) out << "npus:     none (" << info.npu_note() << ")\n";
  for (const auto& d : info.npus()) {
    // The memory npu-smi shows: HBM, or DDR on 310P/310 cards (card and chip
    // ids are npu-smi's -i and -c; the id is the device id slots take).
    const bool ddr = d.memory_kind() == crest::v1::NPU_MEMORY_DDR;
    const uint64_t used = d.memory_total_mib() > 0 ? d.memory_used_mib() : d.hbm_used_mib();
    const uint64_t total = d.memory_total_mib() > 0 ? d.memory_total_mib() : d.hbm_total_mib();
    out << "npu " << d.id() << ":    " << d.name() << " " << d.health() << (ddr ? " DDR " : " HBM ")
        << used << "/" << total << " MiB (card " << d.card_id() << " chip " << d.chip_id() << ")\n";
  }
  for (const auto& slot : info.slots()) {
    out << "slot " << slot.index() << ":   npus " << absl::StrJoin(slot.npus(), ",") << ", cpus "
        << (slot.cpu_list().empty() ? "not pinned" : slot.cpu_list()) << ", port " << slot.port()
        << ", daemon " << crest::v1::DaemonState_Name(slot.daemon().state()) << "\n";
  }
  if (info.slots_size() > 0) {
    out << "slot cpu: " << info.slot_cpu_rule()
        << (info.slot_cpu_note().empty() ? "" : " (" + info.slot_cpu_note() + ")") << "\n";
  }
  AppendHost(out, info.host());
  for (const auto& [k, v] : info.labels()) out << "label:    " << k << "=" << v << "\n";
  return out.str();
}

std::string HostTuningText(const crest::v1::HostTuningReply& reply) {
  std::ostringstream out;
  for (const auto& r : reply.results()) {
    out << r.setting() << ": "
        << (r.support() == crest::v1::SETTING_UNSUPPORTED
                ? "unsupported"
                : absl::StrCat(r.previous(), " -> ", r.current()))
        << (r.message().empty() ? "" : "  (" + r.message() + ")") << "\n";
  }
  if (reply.results().empty()) out << "nothing recorded; nothing to restore\n";
  return out.str();
}

std::string DaemonStartingText(const crest::v1::DaemonStarting& starting) {
  return absl::StrCat("starting: pid ", starting.pid(), ", pinned to ",
                      PinnedTo(starting.pinned_cpu_list()), "\n");
}

std::string DaemonReadyText(const crest::v1::DaemonReady& ready) {
  std::ostringstream out;
  out << "ready: pid " << ready.pid() << ", npuBlockNum ";
  if (ready.npu_block_num() > 0) {
    out << ready.npu_block_num();
  } else {
    out << "unknown";
  }
  out << ", pinned to " << PinnedTo(ready.pinned_cpu_list()) << ", after "
      << TimeUtil::DurationToMilliseconds(ready.startup_time()) / 1000.0 << " s\n";
  if (!ready.npu_block_source().empty()) {
    out << "npuBlockNum from: " << ready.npu_block_source() << "\n";
  }
  if (!ready.npu_block_num_unknown().empty()) {
    out << "npuBlockNum: " << ready.npu_block_num_unknown() << "\n";
  }
  out << "business:   " << ready.business_url() << "\n"
      << "management: " << ready.management_url() << "\n";
  for (const auto& o : ready.effective())
    out << "  " << o.key() << " = " << OverrideValue(o) << "\n";
  return out.str();
}

std::string DaemonStopText(const crest::v1::StopDaemonReply& reply) {
  if (!reply.was_running()) return "no daemon was running\n";
  return absl::StrCat("stopped (exit code ", reply.exit_code(), reply.killed() ? ", SIGKILL" : "",
                      ")\n");
}

std::string DaemonStatusText(const crest::v1::DaemonStatus& status) {
  std::string out = absl::StrCat("state: ", crest::v1::DaemonState_Name(status.state()), "\n");
  if (status.pid() != 0) {
    absl::StrAppend(&out, "pid ", status.pid(), ", npuBlockNum ", status.npu_block_num(),
                    ", pinned to ", PinnedTo(status.pinned_cpu_list()), "\n");
  }
  if (status.has_last_failure()) {
    absl::StrAppend(&out, "last failure: ", status.last_failure().reason(), "\n");
  }
  return out;
}

std::string BenchmarkProgressText(const crest::v1::BenchmarkProgress& p) {
  return absl::StrCat("\rprogress: ", p.requests_done(), "/", p.requests_total(), " done, ",
                      p.requests_failed(), " failed, ", static_cast<int64_t>(p.tokens_per_second()),
                      " tokens/s   ");
}

std::string BenchmarkResultText(const crest::v1::BenchmarkResult& result) {
  std::ostringstream out;
  out << "GenerateSpeed:          " << result.generate_speed() << " token/s\n"
      << "GenerateSpeedPerClient: " << result.generate_speed_per_client() << " token/s\n"
      << "Throughput:             " << result.qps() << " req/s\n"
      << "FirstTokenTime avg:     " << result.first_token_time().average_ms() << " ms\n"
      << "DecodeTime avg:         " << result.decode_time().average_ms() << " ms\n"
      << "Returned / Failed:      " << result.succeeded() << " / " << result.failed() << "\n";
  return out.str();
}

}  // namespace crest::cli
