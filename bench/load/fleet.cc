#include "bench/load/fleet.h"

#include <grpcpp/server_builder.h>
#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "agent/agent_config.h"
#include "agent/request_validation.h"
#include "common/status.h"
#include "common/tls.h"

namespace crest::bench {
namespace {

namespace exp = grpc::experimental;

// Times each Heartbeat call from its first byte sent to its status.
class HeartbeatTimer final : public exp::Interceptor {
 public:
  explicit HeartbeatTimer(LatencyLog* log) : log_(log) {}
  void Intercept(exp::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            exp::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      start_ = absl::Now();
    }
    if (methods->QueryInterceptionHookPoint(exp::InterceptionHookPoints::POST_RECV_STATUS)) {
      log_->Add(absl::ToDoubleMilliseconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  LatencyLog* log_;
  absl::Time start_;
};

class HeartbeatTimerFactory final : public exp::ClientInterceptorFactoryInterface {
 public:
  explicit HeartbeatTimerFactory(LatencyLog* log) : log_(log) {}
  exp::Interceptor* CreateClientInterceptor(exp::ClientRpcInfo* info) override {
    if (std::string(info->method()) != "/crest.v1.Controller/Heartbeat") return nullptr;
    return new HeartbeatTimer(log_);
  }

 private:
  LatencyLog* log_;
};

}  // namespace

void LatencyLog::Add(double ms) {
  absl::MutexLock lock(&mu_);
  ms_.push_back(ms);
}

size_t LatencyLog::count() const {
  absl::MutexLock lock(&mu_);
  return ms_.size();
}

double LatencyLog::Quantile(double q) const {
  absl::MutexLock lock(&mu_);
  if (ms_.empty()) return 0;
  std::vector<double> v = ms_;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))];
}

std::string Fleet::NodeName(int i) { return absl::StrCat("node-", i + 1); }
std::string Fleet::Group(int i, int groups) { return absl::StrCat("g", i % groups); }

absl::StatusOr<std::unique_ptr<Fleet>> Fleet::Start(const FleetOptions& options) {
  std::unique_ptr<Fleet> fleet(new Fleet());
  // Node calls only from the controller's certificate, as on a real agent.
  fleet->authz_ =
      std::make_unique<Authorizer>("crest.v1.NodeAgent", NodeAgentMethodRoles(), AuthzOptions{});
  agent::AgentConfig config;  // the published limits of an agent with the default config
  config.limits = agent::DefaultParamLimits();
  for (int i = 0; i < options.agents; ++i) {
    const std::string name = NodeName(i);
    CREST_ASSIGN_OR_RETURN(crest::testing::CertFiles cert, options.ca->Issue(name));
    TlsOptions tls{.insecure = false,
                   .cert_file = cert.cert,
                   .key_file = cert.key,
                   .ca_file = options.ca->ca_file(),
                   .server_name_override = ""};
    Node node;
    node.fake = std::make_shared<controller::testing::FakeAgent>(name);
    node.fake->SetBlockNum(options.npu_block_num);
    node.fake->SetCurve(options.curve);
    node.service =
        std::make_unique<FakeNodeAgentService>(node.fake, fleet->authz_.get(), options.node);
    CREST_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(tls));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port);
    builder.RegisterService(node.service.get());
    node.server = builder.BuildAndStart();
    if (node.server == nullptr || port == 0) {
      return absl::UnavailableError(absl::StrCat(name, ": cannot listen on 127.0.0.1"));
    }
    ClientInterceptors timers;
    timers.push_back(std::make_unique<HeartbeatTimerFactory>(&fleet->heartbeat_latency_));
    CREST_ASSIGN_OR_RETURN(auto channel, MakeChannel(options.controller, tls, std::move(timers)));
    agent::RegistrarOptions registration;
    registration.node_name = name;
    registration.advertise_address = absl::StrCat("127.0.0.1:", port);
    registration.labels = {{"model", options.model}, {"group", Group(i, options.groups)}};
    registration.capabilities = {"host-tuning", "pinning", "benchmark", "mindie-sim"};
    registration.parameter_limits = agent::PublishedParameterLimits(config);
    registration.benchmark_limits = agent::PublishedBenchmarkLimits();
    auto* fake = node.fake.get();
    node.registrar = std::make_unique<agent::Registrar>(
        crest::v1::Controller::NewStub(channel), registration, [fake] {
          return fake->daemons_running() > 0 ? crest::v1::DAEMON_READY : crest::v1::DAEMON_STOPPED;
        });
    node.registrar->Start();
    fleet->nodes_.push_back(std::move(node));
  }
  return fleet;
}

void Fleet::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (Node& n : nodes_) {
    if (n.registrar != nullptr) n.registrar->Stop();
  }
  for (Node& n : nodes_) {
    if (n.server != nullptr) n.server->Shutdown(std::chrono::system_clock::now());
  }
}

Fleet::~Fleet() { Stop(); }

uint64_t Fleet::registrations() const {
  uint64_t n = 0;
  for (const Node& node : nodes_) n += node.registrar->registrations();
  return n;
}

uint64_t Fleet::heartbeats() const {
  uint64_t n = 0;
  for (const Node& node : nodes_) n += node.registrar->heartbeats();
  return n;
}

}  // namespace crest::bench
