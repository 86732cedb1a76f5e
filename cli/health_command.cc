// `crest health --address ADDR`: the standard gRPC health check
// (grpc.health.v1.Health/Check) over Crest's mutual TLS. It is what the
// Kubernetes probes run with the pod's own certificate, since the kubelet's
// built-in gRPC probe presents no client certificate (decision 0012). Exit 0
// when SERVING, 1 otherwise, with one line saying which.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "grpc/health/v1/health.grpc.pb.h"

#include "common/tls.h"

namespace crest::cli {
namespace {

struct HealthFlags {
  std::string address;
  std::string service;  // "": the server as a whole
  TlsOptions tls;
  std::string tls_server_name;
  double timeout_s = 5;
};

int RunHealth(const HealthFlags& f) {
  TlsOptions tls = f.tls;
  tls.server_name_override = f.tls_server_name;
  auto channel = MakeChannel(f.address, tls);
  if (!channel.ok()) return Fail(std::string(channel.status().message()));
  auto stub = grpc::health::v1::Health::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(f.service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = stub->Check(&ctx, request, &response);
  if (!s.ok()) {
    return Fail(absl::StrCat("health of ", f.address, ": unreachable or refused (gRPC code ",
                             static_cast<int>(s.error_code()), "): ", s.error_message()));
  }
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return Fail(absl::StrCat("health of ", f.address, ": ", status));
  }
  std::cout << f.address << ": " << status << "\n";
  return 0;
}

}  // namespace

void AddHealthCommand(CLI::App& crest, Action* action) {
  auto f = std::make_shared<HealthFlags>();
  CLI::App* cmd = crest.add_subcommand(
      "health", "Check a controller's or agent's gRPC health service (exit 0 when SERVING)");
  cmd->add_option("--address", f->address, "Server address, host:port")->required();
  cmd->add_option("--service", f->service, "Service name to check (default: the whole server)");
  cmd->add_option("--timeout", f->timeout_s, "Deadline of the check in seconds")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  AddTlsFlags(*cmd, f->tls);
  cmd->add_option("--tls-server-name", f->tls_server_name,
                  "Name expected in the server's certificate (default: the dialled host)")
      ->group("Security");
  cmd->callback([f, action] { *action = [f] { return RunHealth(*f); }; });
}

}  // namespace crest::cli
