#include "common/testing/tls_callers.h"

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "common/tls.h"

namespace crest::testing {

std::shared_ptr<grpc::Channel> TlsCallers::With(const CertFiles& cert) const {
  auto channel = MakeChannel(address_, TlsOptions{false, cert.cert, cert.key, ca_->ca_file(), ""});
  EXPECT_TRUE(channel.ok()) << channel.status();
  return channel.ok() ? *channel : nullptr;
}

std::shared_ptr<grpc::Channel> TlsCallers::As(const std::string& identity) const {
  auto cert = ca_->Issue(identity);
  EXPECT_TRUE(cert.ok()) << cert.status();
  return cert.ok() ? With(*cert) : nullptr;
}

std::shared_ptr<grpc::Channel> TlsCallers::WithoutCertificate() const {
  auto ca_pem = ReadFileToString(ca_->ca_file());
  EXPECT_TRUE(ca_pem.ok()) << ca_pem.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem.ok() ? *ca_pem : "";
  return grpc::CreateChannel(address_, grpc::SslCredentials(ssl));
}

void SetTestDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace crest::testing
