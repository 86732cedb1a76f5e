#include "agent/slot_setup.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "agent/config_json_editor.h"
#include "common/file_util.h"
#include "common/listen_port.h"
#include "common/status.h"

namespace crest::agent {
namespace {

// Three ports no slot has yet and nothing listens on now; held (`hold`) for
// the built-in simulator.
absl::Status PickPorts(std::set<int>& taken, SlotRuntime& slot, bool hold) {
  for (int* port : {&slot.port, &slot.management_port, &slot.metrics_port}) {
    for (int tries = 0;; ++tries) {
      CREST_ASSIGN_OR_RETURN(int p, hold ? ReserveListenPortInto(slot.reserved) : PickListenPort());
      if (taken.insert(p).second) {
        *port = p;
        break;
      }
      if (tries > 100) return absl::ResourceExhaustedError("no free port left for the slots");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string SlotStateDir(const std::string& state_dir, uint32_t index) {
  return absl::StrCat(state_dir, "/slots/", index);
}

absl::StatusOr<std::vector<SlotRuntime>> PrepareSlots(const AgentConfig& config,
                                                      const SlotPlan& plan,
                                                      const std::string& state_dir) {
  std::vector<SlotRuntime> out;
  if (!config.slots) {
    SlotRuntime lone;
    if (!plan.slots.empty()) lone.layout = plan.slots.front();
    lone.layout.cpus.clear();  // StartDaemon's pinning decides, as before slots
    lone.config = config;
    lone.state_dir = state_dir;
    out.push_back(std::move(lone));
    return out;
  }
  // The original: a crashed single-slot agent's backup wins over the file it
  // had edited.
  CREST_ASSIGN_OR_RETURN(std::string original,
                         ConfigJsonFile(config.config_json, state_dir).Original());
  // The format says where each edit goes (1.0.RC1 keeps the ports in
  // OtherParam.ServeParam).
  CREST_ASSIGN_OR_RETURN(MindieConfigView view, ParseMindieConfig(original));
  const ConfigFormat format = view.format;
  std::set<int> taken;
  std::vector<std::string> texts;
  for (const SlotLayout& layout : plan.slots) {
    SlotRuntime slot;
    slot.layout = layout;
    slot.state_dir = SlotStateDir(state_dir, layout.index);
    CREST_RETURN_IF_ERROR(PickPorts(taken, slot, config.use_builtin_sim));
    slot.config = config;
    slot.config.config_json = absl::StrCat(slot.state_dir, "/conf/config.json");
    slot.config.log_file = absl::StrCat(slot.state_dir, "/daemon.log");
    for (std::string& arg : slot.config.args) {
      if (arg == config.config_json) arg = slot.config.config_json;  // mindie-sim's --config
    }
    const ConfigPaths& paths = PathsOf(format);
    std::vector<JsonEdit> edits = {
        {Under(paths.server, "port"), absl::StrCat(slot.port)},
        {Under(paths.server, "managementPort"), absl::StrCat(slot.management_port)},
        {Under(paths.server, "metricsPort"), absl::StrCat(slot.metrics_port)},
        {paths.device_ids, absl::StrCat("[[", absl::StrJoin(layout.npus, ","), "]]")},
        {Under(Under(Under(paths.deploy, paths.models), "[0]"), "worldSize"),
         absl::StrCat(layout.npus.size())},
    };
    auto text = ApplyJsonEdits(original, edits);
    if (!text.ok()) {
      return Annotate(text.status(), absl::StrCat("slot ", layout.index, ": editing a copy of ",
                                                  config.config_json));
    }
    texts.push_back(*std::move(text));
    out.push_back(std::move(slot));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    CREST_RETURN_IF_ERROR(MakeDirectories(out[i].state_dir + "/conf"));
    CREST_RETURN_IF_ERROR(WriteFileAtomically(out[i].config.config_json, texts[i], 0640));
  }
  return out;
}

}  // namespace crest::agent
