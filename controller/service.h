// The crest.v1.Controller gRPC service: thin callback-API adapters over
// AgentRegistry and CampaignManager. WatchCampaign is a ServerWriteReactor
// fed by the manager's change notifications, with one write in flight and
// only the newest snapshot kept while a write is pending. Every handler first
// asks the Authorizer whether the caller's certificate may call it.
#pragma once

#include "common/peer_identity.h"
#include "controller/agent_registry.h"
#include "controller/campaign_manager.h"
#include "crest/v1/controller.grpc.pb.h"

namespace crest::controller {

class ControllerService final : public crest::v1::Controller::CallbackService {
 public:
  ControllerService(AgentRegistry* registry, CampaignManager* manager, const Authorizer* authz)
      : registry_(registry), manager_(manager), authz_(authz) {}

  grpc::ServerUnaryReactor* RegisterAgent(grpc::CallbackServerContext* ctx,
                                          const crest::v1::RegisterAgentRequest* request,
                                          crest::v1::RegisterAgentReply* reply) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const crest::v1::HeartbeatRequest* request,
                                      crest::v1::HeartbeatReply* reply) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const crest::v1::ListAgentsRequest* request,
                                       crest::v1::ListAgentsReply* reply) override;
  grpc::ServerUnaryReactor* CreateCampaign(grpc::CallbackServerContext* ctx,
                                           const crest::v1::CreateCampaignRequest* request,
                                           crest::v1::Campaign* reply) override;
  grpc::ServerUnaryReactor* GetCampaign(grpc::CallbackServerContext* ctx,
                                        const crest::v1::GetCampaignRequest* request,
                                        crest::v1::Campaign* reply) override;
  grpc::ServerUnaryReactor* ListCampaigns(grpc::CallbackServerContext* ctx,
                                          const crest::v1::ListCampaignsRequest* request,
                                          crest::v1::ListCampaignsReply* reply) override;
  grpc::ServerWriteReactor<crest::v1::Campaign>* WatchCampaign(
      grpc::CallbackServerContext* ctx, const crest::v1::WatchCampaignRequest* request) override;
  grpc::ServerUnaryReactor* CancelCampaign(grpc::CallbackServerContext* ctx,
                                           const crest::v1::CancelCampaignRequest* request,
                                           crest::v1::Campaign* reply) override;
  grpc::ServerUnaryReactor* GetCampaignReport(grpc::CallbackServerContext* ctx,
                                              const crest::v1::GetCampaignReportRequest* request,
                                              crest::v1::CampaignReport* reply) override;

 private:
  AgentRegistry* registry_;
  CampaignManager* manager_;
  const Authorizer* authz_;
};

}  // namespace crest::controller
