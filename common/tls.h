// Transport security for every Crest gRPC endpoint: mutual TLS from PEM files,
// or plaintext when explicitly asked for (--insecure).
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's own namespace
class App;
}  // namespace CLI

namespace crest {

// What --tls-cert/--tls-key/--tls-ca/--insecure said.
struct TlsOptions {
  bool insecure = false;
  std::string cert_file;  // PEM certificate chain of this endpoint
  std::string key_file;   // PEM private key of cert_file
  std::string ca_file;    // PEM CA bundle that peers must chain to
  // Client side only: expected name in the server's certificate when it
  // differs from the dialled host (e.g. dialling 127.0.0.1 of "crest-agent").
  std::string server_name_override;
};

// Adds --tls-cert, --tls-key, --tls-ca and --insecure, bound to `tls`: the
// same flags on every binary with a gRPC edge.
void AddTlsFlags(CLI::App& app, TlsOptions& tls);

// Checks the combination: --insecure alone, or all three files readable.
absl::Status ValidateTlsOptions(const TlsOptions& options);

// Server side: requires and verifies a client certificate from the CA.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

// Client side: presents cert/key, verifies the server against the CA.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options);

using ClientInterceptors =
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>;

// A channel to `address` with Crest's channel arguments (keepalive, retries of
// UNAVAILABLE for idempotent calls, TLS target-name override), and
// `interceptors` on every call when given (benchmarks time calls with them).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const TlsOptions& options,
                                                           ClientInterceptors interceptors = {});

// True for addresses on the loopback interface ("127.x", "[::1]", "localhost").
bool IsLoopbackAddress(const std::string& address);

}  // namespace crest
