// `crest health --address ADDR`: the standard gRPC health check
// (grpc.health.v1.Health/Check) over Crest's mutual TLS. It is what the
// Kubernetes probes run with the pod's own certificate, since the kubelet's
// built-in gRPC probe presents no client certificate (decision 0012). Exit 0
// when SERVING, 1 otherwise, with one line saying which.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/rpc_client.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace crest::cli {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckResponse;

struct HealthFlags {
  Endpoint endpoint{kHealthPeer};
  std::string service;  // "": the server as a whole
};

// A probe's answer is yes or no: every failure of the call is "unreachable
// or refused", with its code, which the probes' logs show.
int RunHealth(const HealthFlags& f) {
  const std::string& address = f.endpoint.address;
  auto client = RpcClient<Health>::Open(f.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  RpcCall call(f.endpoint, "health", kHealthTimeout);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(f.service);
  HealthCheckResponse response;
  grpc::Status s = client->stub().Check(call.context(), request, &response);
  if (!s.ok()) {
    return Fail(absl::StrCat("health of ", address, ": unreachable or refused (gRPC code ",
                             static_cast<int>(s.error_code()), "): ", s.error_message()));
  }
  const std::string status = HealthCheckResponse::ServingStatus_Name(response.status());
  if (response.status() != HealthCheckResponse::SERVING) {
    return Fail(absl::StrCat("health of ", address, ": ", status));
  }
  std::cout << address << ": " << status << "\n";
  return 0;
}

}  // namespace

void AddHealthCommand(CLI::App& crest, Action* action) {
  auto f = std::make_shared<HealthFlags>();
  CLI::App* cmd = crest.add_subcommand(
      "health", "Check a controller's or agent's gRPC health service (exit 0 when SERVING)");
  AddEndpointFlags(*cmd, &f->endpoint, kHealthTimeout);
  cmd->add_option("--service", f->service, "Service name to check (default: the whole server)");
  cmd->callback([f, action] { *action = [f] { return RunHealth(*f); }; });
}

}  // namespace crest::cli
