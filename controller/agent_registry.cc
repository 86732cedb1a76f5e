#include "controller/agent_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"

#include "common/status.h"

namespace crest::controller {
namespace {

google::protobuf::Timestamp ToProto(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

void LogReady(const crest::v1::AgentInfo& info) {
  spdlog::info("agent {} at {} is ready", info.node_name(), info.address());
}

}  // namespace

absl::Status ValidateRegistration(const crest::v1::RegisterAgentRequest& request) {
  const std::string& name = request.node_name();
  if (name.empty()) return absl::InvalidArgumentError("node_name: required");
  if (name.size() > 253 || !std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("node_name: expected at most 253 letters, digits, '-', '.' or '_' (got ",
                     name.size(), " bytes)"));
  }
  const std::string& address = request.advertise_address();
  auto colon = address.rfind(':');
  int port = 0;
  if (address.size() > 300 || colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("advertise_address: expected host:port with a port in [1, 65535], got '",
                     address.substr(0, 80), address.size() > 80 ? "...'" : "'"));
  }
  if (request.labels_size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: at most 64, got ", request.labels_size()));
  }
  for (const auto& [k, v] : request.labels()) {
    if (k.empty() || k.size() > 63 || v.size() > 256) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: key '", k.substr(0, 63),
                       "': expected a key of 1 to 63 characters and a value "
                       "of at most 256"));
    }
  }
  if (request.capabilities_size() > 32 || request.agent_version().size() > 256) {
    return absl::InvalidArgumentError(
        "capabilities/agent_version: at most 32 capabilities and a version of 256 characters");
  }
  for (const auto* limits : {&request.parameter_limits(), &request.benchmark_limits()}) {
    const char* field =
        limits == &request.parameter_limits() ? "parameter_limits" : "benchmark_limits";
    if (limits->size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": at most 64, got ", limits->size()));
    }
    for (const crest::v1::ParameterLimit& l : *limits) {
      if (l.key().empty() || l.key().size() > 63 || !std::isfinite(l.min()) ||
          !std::isfinite(l.max()) || l.min() > l.max()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": '", l.key().substr(0, 63),
                         "': expected a key of 1 to 63 characters and finite min <= max"));
      }
    }
  }
  for (const std::string& c : request.capabilities()) {
    if (c.size() > 63)
      return absl::InvalidArgumentError("capabilities: at most 63 characters each");
  }
  return absl::OkStatus();
}

double TimeScales::For(const std::string& node) const {
  auto it = per_node.find(node);
  return it != per_node.end() ? it->second : every_node;
}

absl::StatusOr<TimeScales> ParseTimeScales(const std::string& text) {
  TimeScales scales;
  bool every_set = false;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string& number = kv.size() == 2 ? kv[1] : kv[0];
    double k = 0;
    if (!absl::SimpleAtod(number, &k) || !(k > 0) || k > 1e6) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sim-time-scale: '", item, "': expected K or NAME=K with K a number in (0, 1e6]"));
    }
    if (kv.size() == 1) {
      if (every_set) {
        return absl::InvalidArgumentError("--sim-time-scale: more than one scale for every node");
      }
      every_set = true;
      scales.every_node = k;
    } else if (kv[0].empty() || !scales.per_node.emplace(kv[0], k).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sim-time-scale: '", item, "': no node name, or the node named twice"));
    }
  }
  return scales;
}

AgentRegistry::AgentRegistry(const Clock* clock, RegistryOptions options, StateStore* store)
    : clock_(clock), options_(std::move(options)), store_(store) {}

void AgentRegistry::SetOnChange(std::function<void()> cb) { on_change_ = std::move(cb); }

void AgentRegistry::SetOnLost(std::function<void(const std::string&)> cb) {
  on_lost_ = std::move(cb);
}

void AgentRegistry::Changed() {
  if (on_change_) on_change_();
}

void AgentRegistry::Lost(const std::vector<std::string>& names) {
  if (!on_lost_) return;
  for (const std::string& name : names) on_lost_(name);
}

bool AgentRegistry::Touch(Entry* e) const {
  e->last_seen = clock_->Now();
  *e->info.mutable_last_seen() = ToProto(e->last_seen);
  if (e->info.state() == crest::v1::AGENT_READY) return false;
  e->info.set_state(crest::v1::AGENT_READY);
  return true;
}

void AgentRegistry::AddStatic(const std::string& name, const std::string& address) {
  {
    absl::MutexLock lock(&mu_);
    Entry& e = agents_[name];
    e.info.set_node_name(name);
    e.info.set_address(address);
    e.info.set_static_(true);
    // Lost until the first successful probe.
    e.info.set_state(crest::v1::AGENT_LOST);
    e.last_seen = absl::InfinitePast();
  }
  Changed();
}

absl::Status AgentRegistry::Register(const crest::v1::RegisterAgentRequest& request) {
  auto apply = [&](Entry* e) {
    e->info.set_node_name(request.node_name());
    e->info.set_address(request.advertise_address());
    e->info.mutable_labels()->clear();
    for (const auto& [k, v] : request.labels()) (*e->info.mutable_labels())[k] = v;
    *e->info.mutable_parameter_limits() = request.parameter_limits();
    *e->info.mutable_benchmark_limits() = request.benchmark_limits();
    e->info.set_slots(request.slots());
    return Touch(e);
  };
  CREST_RETURN_IF_ERROR(ValidateRegistration(request));
  absl::MutexLock write_lock(&register_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(request.node_name());
    if (it != agents_.end() && it->second.info.static_()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", request.node_name(), " is a static agent of this controller (--agents ",
          request.node_name(), "=", it->second.info.address(),
          "): a registration may not replace it; start the agent without --controller"));
    }
  }
  if (store_ != nullptr) {
    Entry e;
    {
      absl::MutexLock lock(&mu_);
      auto it = agents_.find(request.node_name());
      if (it != agents_.end()) e = it->second;
    }
    apply(&e);
    Batch batch;
    batch.agents.push_back(e.info);
    absl::Status s = store_->Apply(batch);
    if (!s.ok()) {
      spdlog::error("cannot record the registration of agent {}: {}", request.node_name(),
                    s.ToString());
      return absl::UnavailableError(
          absl::StrCat("the controller could not record the registration of ", request.node_name(),
                       " (", s.message(), "); register again later"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    Entry& e = agents_[request.node_name()];
    if (apply(&e)) LogReady(e.info);
  }
  Changed();
  return absl::OkStatus();
}

bool AgentRegistry::Heartbeat(const std::string& name) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(name);
    if (it == agents_.end()) return false;
    changed = Touch(&it->second);
    if (changed) LogReady(it->second.info);
  }
  if (changed) Changed();
  return true;
}

void AgentRegistry::MarkSeen(const std::string& name, const crest::v1::NodeInfo* info) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(name);
    if (it == agents_.end()) return;
    if (info != nullptr) {
      for (const auto& [k, v] : info->labels()) (*it->second.info.mutable_labels())[k] = v;
      *it->second.info.mutable_parameter_limits() = info->parameter_limits();
      *it->second.info.mutable_benchmark_limits() = info->benchmark_limits();
      it->second.info.set_slots(static_cast<uint32_t>(info->slots_size()));
    }
    changed = Touch(&it->second);
    if (changed) LogReady(it->second.info);
  }
  if (changed) Changed();
}

void AgentRegistry::MarkLost(const std::string& name, const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(name);
    if (it == agents_.end() || it->second.info.state() == crest::v1::AGENT_LOST) return;
    it->second.info.set_state(crest::v1::AGENT_LOST);
    // A lost agent must be heard from afresh before it counts as ready.
    it->second.last_seen = std::min(it->second.last_seen, clock_->Now());
    spdlog::warn("agent {} is lost: {}", name, why);
  }
  Lost({name});
  Changed();
}

std::vector<std::string> AgentRegistry::CheckLiveness() {
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    absl::Time deadline = now - options_.heartbeat_interval * options_.missed_heartbeats;
    for (auto& [name, e] : agents_) {
      // The clock went back: count the silence from now, or an agent heard
      // "in the future" could never be found silent.
      e.last_seen = std::min(e.last_seen, now);
      if (e.info.state() == crest::v1::AGENT_READY && e.last_seen < deadline) {
        e.info.set_state(crest::v1::AGENT_LOST);
        lost.push_back(name);
        spdlog::warn("agent {} is lost: no heartbeat for {} intervals of {}", name,
                     options_.missed_heartbeats, absl::FormatDuration(options_.heartbeat_interval));
      }
    }
  }
  if (!lost.empty()) {
    Lost(lost);
    Changed();
  }
  return lost;
}

void AgentRegistry::SetRunningTrial(const std::string& name, uint32_t slot,
                                    const std::string& trial_id) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(name);
  if (it == agents_.end()) return;
  Entry& e = it->second;
  if (trial_id.empty()) {
    e.running.erase(slot);
  } else {
    e.running[slot] = trial_id;
  }
  std::vector<std::string> trials;
  trials.reserve(e.running.size());
  for (const auto& [s, trial] : e.running) trials.push_back(trial);
  e.info.set_running_trial(absl::StrJoin(trials, ","));
}

std::vector<crest::v1::AgentInfo> AgentRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<crest::v1::AgentInfo> out;
  out.reserve(agents_.size());
  for (const auto& [name, e] : agents_) out.push_back(e.info);
  return out;
}

std::optional<crest::v1::AgentInfo> AgentRegistry::Get(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(name);
  if (it == agents_.end()) return std::nullopt;
  return it->second.info;
}

bool AgentRegistry::IsReady(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(name);
  return it != agents_.end() && it->second.info.state() == crest::v1::AGENT_READY;
}

void AgentRegistry::Restore(const std::vector<crest::v1::AgentInfo>& agents) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& a : agents) {
      if (agents_.count(a.node_name()) != 0) continue;  // --agents wins
      Entry& e = agents_[a.node_name()];
      e.info = a;
      e.info.set_state(crest::v1::AGENT_LOST);
      e.info.clear_running_trial();
      e.last_seen = absl::InfinitePast();
    }
  }
  Changed();
}

}  // namespace crest::controller
