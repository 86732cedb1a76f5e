#include "common/tls.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest {

void AddTlsFlags(CLI::App& app, TlsOptions& tls) {
  app.add_option("--tls-cert", tls.cert_file, "PEM certificate of this endpoint (mutual TLS)")
      ->group("Security");
  app.add_option("--tls-key", tls.key_file, "PEM private key of --tls-cert")->group("Security");
  app.add_option("--tls-ca", tls.ca_file, "PEM CA bundle that peers' certificates must chain to")
      ->group("Security");
  app.add_flag("--insecure", tls.insecure, "Plaintext gRPC (loopback and testing only)")
      ->group("Security");
}

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  auto contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": ", contents.status().message()));
  }
  if (!absl::StrContains(*contents, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return contents;
}

}  // namespace

absl::Status ValidateTlsOptions(const TlsOptions& options) {
  bool any_file =
      !options.cert_file.empty() || !options.key_file.empty() || !options.ca_file.empty();
  if (options.insecure) {
    if (any_file) {
      return absl::InvalidArgumentError(
          "--insecure cannot be combined with --tls-cert/--tls-key/--tls-ca");
    }
    return absl::OkStatus();
  }
  if (options.cert_file.empty() || options.key_file.empty() || options.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs all of --tls-cert, --tls-key and --tls-ca (or --insecure for plaintext)");
  }
  CREST_RETURN_IF_ERROR(ReadPem(options.cert_file, "--tls-cert").status());
  CREST_RETURN_IF_ERROR(ReadPem(options.key_file, "--tls-key").status());
  CREST_RETURN_IF_ERROR(ReadPem(options.ca_file, "--tls-ca").status());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options) {
  CREST_RETURN_IF_ERROR(ValidateTlsOptions(options));
  if (options.insecure) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  CREST_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(options.ca_file, "--tls-ca"));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  CREST_ASSIGN_OR_RETURN(pair.private_key, ReadPem(options.key_file, "--tls-key"));
  CREST_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(options.cert_file, "--tls-cert"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options) {
  CREST_RETURN_IF_ERROR(ValidateTlsOptions(options));
  if (options.insecure) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  CREST_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(options.ca_file, "--tls-ca"));
  CREST_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(options.key_file, "--tls-key"));
  CREST_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(options.cert_file, "--tls-cert"));
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const TlsOptions& options,
                                                           ClientInterceptors interceptors) {
  if (address.empty()) return absl::InvalidArgumentError("empty address (expected host:port)");
  CREST_ASSIGN_OR_RETURN(auto credentials, MakeChannelCredentials(options));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly after a peer restarts (the default backoff reaches minutes).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  // Despite its name gRPC reads this as the time one connection attempt (TCP,
  // TLS handshake, HTTP/2 settings) may take, not as a back-off. At 200 ms an
  // attempt to a busy host or over a long round trip timed out every time and
  // the controller counted the agent lost (controller-load-bench found it).
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10000);
  if (!options.server_name_override.empty()) {
    args.SetSslTargetNameOverride(options.server_name_override);
  }
  if (interceptors.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(interceptors));
}

bool IsLoopbackAddress(const std::string& address) {
  std::string host = address;
  if (absl::StartsWith(host, "[")) {
    host = host.substr(1, host.find(']') - 1);
  } else if (auto colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  return absl::StartsWith(host, "127.") || host == "::1" || host == "localhost";
}

}  // namespace crest
