// Channels to a gRPC server under test as the holders of various
// certificates of a TestCa, for tests of who may call what: mutual TLS with a
// leaf of a given identity, or TLS that trusts the CA and presents none.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/time/time.h"

#include "common/testing/test_ca.h"

namespace crest::testing {

class TlsCallers {
 public:
  // `ca` must outlive this object; `address` is the server's host:port.
  TlsCallers(const TestCa* ca, std::string address) : ca_(ca), address_(std::move(address)) {}

  // Mutual TLS presenting `cert`.
  std::shared_ptr<grpc::Channel> With(const CertFiles& cert) const;
  // Mutual TLS with a fresh leaf of the CA whose CN (and DNS SAN) is `identity`.
  std::shared_ptr<grpc::Channel> As(const std::string& identity) const;
  // TLS that verifies the server against the CA but presents no certificate.
  std::shared_ptr<grpc::Channel> WithoutCertificate() const;

 private:
  const TestCa* ca_;
  std::string address_;
};

// Every test call gets a deadline, as production calls do, so a server that
// never answers fails the test instead of hanging it.
void SetTestDeadline(grpc::ClientContext* ctx, absl::Duration timeout = absl::Seconds(20));

}  // namespace crest::testing
