// The CLI's one client layer, shared by `crest node`, `crest campaign` and
// `crest health`: which server a command calls and how (address, mutual TLS
// through common/tls.h, the deadline), `--output`, and the one line a failed
// call prints (one text per gRPC code, naming the call and the server).
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "common/status.h"
#include "common/tls.h"

namespace crest::cli {

// The deadline of each kind of call when --timeout is absent.
// Reads: node info and status; campaign list, status, report and agents.
inline constexpr absl::Duration kQueryTimeout = absl::Seconds(30);
// Changes: node tune and restore; campaign submit and cancel.
inline constexpr absl::Duration kChangeTimeout = absl::Seconds(60);
// node start: the daemon's start-up; with --start-timeout, that plus a margin.
inline constexpr absl::Duration kDaemonStartTimeout = absl::Seconds(900);
inline constexpr absl::Duration kDaemonStartMargin = absl::Seconds(60);
// node stop: the grace between SIGTERM and SIGKILL plus a margin.
inline constexpr absl::Duration kDaemonStopMargin = absl::Seconds(90);
// node bench: one benchmark run.
inline constexpr absl::Duration kBenchmarkTimeout = absl::Hours(1);
// campaign watch: a whole campaign, reconnects included.
inline constexpr absl::Duration kWatchTimeout = absl::Hours(24);
// health: a probe's check.
inline constexpr absl::Duration kHealthTimeout = absl::Seconds(5);

// Which server a command group calls, as its flags and messages name it.
struct PeerKind {
  absl::string_view name;          // "agent": "cannot reach the agent at ..."
  absl::string_view address_flag;  // "--agent"
  absl::string_view address_help;
};

inline constexpr PeerKind kAgentPeer{"agent", "--agent", "Agent address (host:port)"};
inline constexpr PeerKind kControllerPeer{"controller", "--controller",
                                          "Controller address (host:port)"};
inline constexpr PeerKind kHealthPeer{"server", "--address", "Server address (host:port)"};

// One command's server and the flags that say how to reach it.
struct Endpoint {
  explicit Endpoint(PeerKind kind) : peer(kind) {}

  PeerKind peer;
  std::string address;
  // --tls-cert/--tls-key/--tls-ca/--insecure, and --tls-server-name as
  // tls.server_name_override.
  TlsOptions tls;
  absl::Duration timeout = absl::ZeroDuration();  // --timeout; zero: the call's default
};

// Adds the address flag (required), the TLS flags, --tls-server-name and
// --timeout (seconds >= 0; 0 means `default_timeout`, shown in --help).
void AddEndpointFlags(CLI::App& cmd, Endpoint* endpoint, absl::Duration default_timeout);

// --timeout when given, else the call's default.
absl::Duration CallTimeout(absl::Duration flag, absl::Duration default_timeout);

// A channel to the endpoint with Crest's channel arguments (common/tls.h).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const Endpoint& endpoint);

// --output: human text (the default) or JSON for scripts.
enum class OutputFormat { kText, kJson };

// "text" or "json"; anything else is an error naming --output.
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text);

// Adds --output bound to `format`; a value ParseOutputFormat refuses is a
// usage error (exit 2).
void AddOutputFlag(CLI::App& cmd, OutputFormat* format);

// What a failed call was and where it went, for its one line.
struct CallSite {
  std::string call;        // the command, e.g. "node info"
  absl::string_view peer;  // PeerKind::name
  std::string address;
  absl::Duration timeout;  // the call's deadline, from its start
};

// "<call>: <what the code means, naming the server and address>: <message>",
// on one line: one text per gRPC code.
std::string RpcErrorText(const CallSite& site, const grpc::Status& status);

// One call to an endpoint: a client context whose deadline is set, and the
// line its failure prints.
class RpcCall {
 public:
  // The deadline is --timeout (or `default_timeout`) from now.
  RpcCall(const Endpoint& endpoint, std::string call, absl::Duration default_timeout);
  // A deadline shared by several calls (a watch that reconnects); `timeout`
  // is the whole span, for the message.
  RpcCall(const Endpoint& endpoint, std::string call, absl::Time deadline, absl::Duration timeout);
  RpcCall(const RpcCall&) = delete;
  RpcCall& operator=(const RpcCall&) = delete;

  grpc::ClientContext* context() { return &context_; }
  const CallSite& site() const { return site_; }
  // The failure with its code and RpcErrorText as the message.
  absl::Status Error(const grpc::Status& status) const;
  // Prints RpcErrorText on stderr (as Fail does) and returns 1.
  int Fail(const grpc::Status& status) const;

 private:
  CallSite site_;
  grpc::ClientContext context_;
};

// A client of one endpoint's `Service` (one channel): unary calls return the
// reply or the failure as RpcErrorText says it; streaming calls use stub()
// with an RpcCall.
template <typename Service>
class RpcClient {
 public:
  template <typename Request, typename Reply>
  using Method = grpc::Status (Service::Stub::*)(grpc::ClientContext*, const Request&, Reply*);

  // Fails on what the flags say wrongly (no address, TLS files); connects lazily.
  static absl::StatusOr<RpcClient> Open(const Endpoint& endpoint) {
    CREST_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, OpenChannel(endpoint));
    return RpcClient(endpoint, Service::NewStub(channel));
  }

  // `call` names the command in the error ("node info").
  template <typename Request, typename Reply>
  absl::StatusOr<Reply> Call(std::string call, absl::Duration default_timeout,
                             Method<Request, Reply> method, const Request& request) {
    RpcCall rpc(*endpoint_, std::move(call), default_timeout);
    Reply reply;
    grpc::Status status = ((*stub_).*method)(rpc.context(), request, &reply);
    if (!status.ok()) return rpc.Error(status);
    return reply;
  }

  typename Service::Stub& stub() { return *stub_; }
  const Endpoint& endpoint() const { return *endpoint_; }

 private:
  RpcClient(const Endpoint& endpoint, std::unique_ptr<typename Service::Stub> stub)
      : endpoint_(&endpoint), stub_(std::move(stub)) {}

  const Endpoint* endpoint_;  // the command's flags, alive as long as the app
  std::unique_ptr<typename Service::Stub> stub_;
};

}  // namespace crest::cli
