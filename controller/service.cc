#include "controller/service.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

#include "common/grpc_status.h"
#include "common/status.h"

namespace crest::controller {
namespace {

using crest::v1::Campaign;

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A stream refused before it started.
class RefusedStream final : public grpc::ServerWriteReactor<Campaign> {
 public:
  explicit RefusedStream(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// Streams a campaign: now, then after every change, until it ends.
class WatchReactor final : public grpc::ServerWriteReactor<Campaign> {
 public:
  WatchReactor(CampaignManager* manager, std::string id) : manager_(manager), id_(std::move(id)) {
    // Subscribe first so no change between the snapshot and the subscription is missed.
    subscription_ = manager_->Subscribe([this](const Campaign& c) { Offer(c); });
    auto first = manager_->Get(id_);
    absl::MutexLock lock(&mu_);
    if (!first.ok()) {
      FinishLocked(ToGrpcStatus(first.status()));
      return;
    }
    if (!offered_) {
      latest_ = *first;
      if (!writing_) WriteLocked();
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "watcher went away"));
    } else if (last_written_final_) {
      FinishLocked(grpc::Status::OK);
    } else if (latest_) {
      WriteLocked();
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (!writing_) FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (subscription_ >= 0) manager_->Unsubscribe(subscription_);
    delete this;
  }

 private:
  void Offer(const Campaign& c) {
    if (c.id() != id_) return;
    absl::MutexLock lock(&mu_);
    if (finished_ || cancelled_) return;
    latest_ = c;
    offered_ = true;
    if (!writing_) WriteLocked();
  }

  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_ = std::move(*latest_);
    latest_.reset();
    last_written_final_ = IsFinal(current_.state());
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  CampaignManager* manager_;
  std::string id_;
  int subscription_ = -1;
  absl::Mutex mu_;
  std::optional<Campaign> latest_ ABSL_GUARDED_BY(mu_);
  Campaign current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool last_written_final_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool offered_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerUnaryReactor* ControllerService::RegisterAgent(
    grpc::CallbackServerContext* ctx, const crest::v1::RegisterAgentRequest* request,
    crest::v1::RegisterAgentReply* reply) {
  if (absl::Status a = authz_->Check("RegisterAgent", *ctx, request->node_name()); !a.ok()) {
    return Done(ctx, a);
  }
  absl::Status registered = registry_->Register(*request);
  if (!registered.ok()) return Done(ctx, registered);
  spdlog::info("agent {} registered from {}", request->node_name(), request->advertise_address());
  *reply->mutable_heartbeat_interval() = google::protobuf::util::TimeUtil::MillisecondsToDuration(
      absl::ToInt64Milliseconds(registry_->options().heartbeat_interval));
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                       const crest::v1::HeartbeatRequest* request,
                                                       crest::v1::HeartbeatReply* reply) {
  if (absl::Status a = authz_->Check("Heartbeat", *ctx, request->node_name()); !a.ok()) {
    return Done(ctx, a);
  }
  reply->set_known(registry_->Heartbeat(request->node_name()));
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::ListAgents(grpc::CallbackServerContext* ctx,
                                                        const crest::v1::ListAgentsRequest*,
                                                        crest::v1::ListAgentsReply* reply) {
  if (absl::Status a = authz_->Check("ListAgents", *ctx); !a.ok()) return Done(ctx, a);
  for (auto& a : registry_->List()) *reply->add_agents() = std::move(a);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::CreateCampaign(
    grpc::CallbackServerContext* ctx, const crest::v1::CreateCampaignRequest* request,
    Campaign* reply) {
  if (absl::Status a = authz_->Check("CreateCampaign", *ctx); !a.ok()) return Done(ctx, a);
  auto c = manager_->Create(request->spec());
  if (c.ok()) *reply = std::move(*c);
  return Done(ctx, c.status());
}

grpc::ServerUnaryReactor* ControllerService::GetCampaign(
    grpc::CallbackServerContext* ctx, const crest::v1::GetCampaignRequest* request,
    Campaign* reply) {
  if (absl::Status a = authz_->Check("GetCampaign", *ctx); !a.ok()) return Done(ctx, a);
  auto c = manager_->Get(request->id());
  if (c.ok()) *reply = std::move(*c);
  return Done(ctx, c.status());
}

grpc::ServerUnaryReactor* ControllerService::ListCampaigns(grpc::CallbackServerContext* ctx,
                                                           const crest::v1::ListCampaignsRequest*,
                                                           crest::v1::ListCampaignsReply* reply) {
  if (absl::Status a = authz_->Check("ListCampaigns", *ctx); !a.ok()) return Done(ctx, a);
  for (auto& c : manager_->List()) *reply->add_campaigns() = std::move(c);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerWriteReactor<Campaign>* ControllerService::WatchCampaign(
    grpc::CallbackServerContext* ctx, const crest::v1::WatchCampaignRequest* request) {
  if (absl::Status a = authz_->Check("WatchCampaign", *ctx); !a.ok()) return new RefusedStream(a);
  return new WatchReactor(manager_, request->id());
}

grpc::ServerUnaryReactor* ControllerService::CancelCampaign(
    grpc::CallbackServerContext* ctx, const crest::v1::CancelCampaignRequest* request,
    Campaign* reply) {
  if (absl::Status a = authz_->Check("CancelCampaign", *ctx); !a.ok()) return Done(ctx, a);
  auto c = manager_->Cancel(request->id());
  if (c.ok()) *reply = std::move(*c);
  return Done(ctx, c.status());
}

grpc::ServerUnaryReactor* ControllerService::GetCampaignReport(
    grpc::CallbackServerContext* ctx, const crest::v1::GetCampaignReportRequest* request,
    crest::v1::CampaignReport* reply) {
  if (absl::Status a = authz_->Check("GetCampaignReport", *ctx); !a.ok()) return Done(ctx, a);
  auto r = manager_->Report(request->id());
  if (r.ok()) *reply = std::move(*r);
  return Done(ctx, r.status());
}

}  // namespace crest::controller
