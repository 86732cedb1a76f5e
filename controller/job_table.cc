#include "controller/job_table.h"

#include <algorithm>
#include <utility>

namespace crest::controller {

void JobTable::Start(const crest::v1::CampaignSpec& spec, const std::string& campaign,
                     const NodeSlot& node_slot, const std::string& model,
                     const std::string& trial_id, std::function<void(Job*, TrialRunner*)> body) {
  auto job = std::make_unique<Job>();
  for (const auto& m : spec.models()) {
    if (m.name() == model) job->exclusive = m.exclusive();
  }
  job->campaign = campaign;
  job->node = node_slot.node;
  job->slot = node_slot.slot;
  job->model = model;
  job->trial_id = trial_id;
  Job* raw = job.get();
  jobs_[NodeSlotKey(node_slot.node, node_slot.slot)] = std::move(job);
  // Each job on the node now has one more neighbour.
  const std::vector<Job*> others = OthersOn(node_slot.node, raw);
  raw->neighbours = static_cast<uint32_t>(others.size());
  for (Job* other : others) other->neighbours = std::max(other->neighbours, raw->neighbours);
  std::string address;
  if (auto agent = registry_->Get(node_slot.node)) address = agent->address();
  raw->thread = std::thread([this, raw, address, body = std::move(body)] {
    TrialRunner runner(connector_->Connect(raw->node, address), raw->node, raw->slot, registry_,
                       call_timeout_, &raw->stop);
    body(raw, &runner);
  });
}

std::vector<JobTable::Job*> JobTable::OthersOn(const std::string& node, const Job* except) const {
  std::vector<Job*> out;
  for (const auto& [key, job] : jobs_) {
    if (job.get() != except && job->node == node && !job->finished) out.push_back(job.get());
  }
  return out;
}

uint32_t JobTable::TakeNeighbours(Job* job) const {
  const uint32_t most = job->neighbours;
  job->neighbours = static_cast<uint32_t>(OthersOn(job->node, job).size());
  return most;
}

void JobTable::StartProbe(const std::string& campaign, const std::string& model,
                          const NodeSlot& node_slot, crest::v1::CampaignSpec spec,
                          std::function<void(Job*, ProbeResult)> done) {
  Start(spec, campaign, node_slot, model, "",
        [spec, done = std::move(done)](Job* job, TrialRunner* runner) {
          done(job, runner->Probe(spec));
        });
}

void JobTable::StartTrial(crest::v1::CampaignSpec spec, crest::v1::Trial trial, bool tune_host,
                          std::function<void(const crest::v1::BenchmarkProgress&)> on_progress,
                          std::function<void(Job*, crest::v1::Trial)> done) {
  const std::string campaign = trial.campaign_id();
  const NodeSlot node_slot{trial.node(), trial.slot()};
  const std::string model = trial.model();
  const std::string id = trial.id();
  Start(spec, campaign, node_slot, model, id,
        [spec, trial = std::move(trial), tune_host, on_progress = std::move(on_progress),
         done = std::move(done)](Job* job, TrialRunner* runner) {
          done(job, runner->Run(spec, trial, tune_host, on_progress));
        });
}

void JobTable::StartSweep(
    crest::v1::CampaignSpec spec, crest::v1::Trial first, bool tune_host,
    std::function<void(const crest::v1::BenchmarkProgress&)> on_progress,
    std::function<std::optional<crest::v1::Trial>(Job*, crest::v1::Trial)> next,
    std::function<void(Job*)> done) {
  const std::string campaign = first.campaign_id();
  const NodeSlot node_slot{first.node(), first.slot()};
  const std::string model = first.model();
  const std::string id = first.id();
  Start(spec, campaign, node_slot, model, id,
        [spec, first = std::move(first), tune_host, on_progress = std::move(on_progress),
         next = std::move(next), done = std::move(done)](Job* job, TrialRunner* runner) {
          runner->RunSweep(spec, first, tune_host, on_progress,
                           [&](crest::v1::Trial ended) { return next(job, std::move(ended)); });
          done(job);
        });
}

bool JobTable::NodeBusy(const std::string& node) const {
  for (const auto& [key, job] : jobs_) {
    if (job->node == node) return true;
  }
  return false;
}

bool JobTable::NodeHeldWhole(const std::string& node) const {
  for (const auto& [key, job] : jobs_) {
    if (job->node == node && job->exclusive) return true;
  }
  return false;
}

std::string JobTable::TrialOn(const std::string& node_slot_key) const {
  auto it = jobs_.find(node_slot_key);
  return it == jobs_.end() ? "" : it->second->trial_id;
}

int JobTable::Count(const std::string& campaign, const std::string& model) const {
  int n = 0;
  for (const auto& [node, job] : jobs_) {
    if (job->campaign == campaign && (model.empty() || job->model == model)) ++n;
  }
  return n;
}

std::vector<RunningJob> JobTable::Of(const std::string& campaign) const {
  std::vector<RunningJob> out;
  for (const auto& [key, job] : jobs_) {
    if (job->campaign == campaign) out.push_back({key, job->model, job->trial_id});
  }
  return out;
}

void JobTable::Stop(const std::string& campaign, StopReason reason) {
  for (auto& [node, job] : jobs_) {
    if (campaign.empty() || job->campaign == campaign) job->stop.Stop(reason);
  }
}

void JobTable::StopLost(const std::function<bool(const std::string& node)>& ready) {
  for (auto& [key, job] : jobs_) {
    if (!job->finished && job->stop.reason() == StopReason::kNone && !ready(job->node)) {
      job->stop.Stop(StopReason::kNodeLost);
    }
  }
}

std::vector<std::unique_ptr<JobTable::Job>> JobTable::Take(bool all) {
  std::vector<std::unique_ptr<Job>> out;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (all || it->second->finished) {
      out.push_back(std::move(it->second));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void JobTable::Join(std::vector<std::unique_ptr<Job>> jobs) {
  for (auto& job : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

}  // namespace crest::controller
