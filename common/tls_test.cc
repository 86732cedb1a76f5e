// Mutual TLS between a real in-process gRPC server and clients on loopback.
#include "common/tls.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "crest/v1/agent.grpc.pb.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::crest::testing::TempDir;
using ::crest::testing::TestCa;

class MutualTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = TestCa::Create(dir_.path(), "crest");
    CREST_ASSERT_OK(ca);
    ca_ = std::make_unique<TestCa>(*std::move(ca));
    auto server_cert = ca_->Issue("crest-agent");
    CREST_ASSERT_OK(server_cert);
    server_options_ = {false, server_cert->cert, server_cert->key, ca_->ca_file(), ""};

    auto creds = MakeServerCredentials(server_options_);
    CREST_ASSERT_OK(creds);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port_);
    // A server needs one service of its own besides the default health service.
    builder.RegisterService(&unimplemented_agent_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  grpc::Status Check(const TlsOptions& client_options) {
    auto channel = MakeChannel("127.0.0.1:" + std::to_string(port_), client_options);
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "no channel");
    auto stub = grpc::health::v1::Health::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status status = stub->Check(&ctx, req, &resp);
    if (status.ok()) {
      EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    }
    return status;
  }

  TempDir dir_;
  std::unique_ptr<TestCa> ca_;
  TlsOptions server_options_;
  crest::v1::NodeAgent::CallbackService unimplemented_agent_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A loopback TCP relay to 127.0.0.1:`upstream` that lets each connection
// wait `delay` before it carries a byte: a slow network or a busy peer,
// whose TLS handshake takes that long.
class SlowRelay {
 public:
  SlowRelay(int upstream, absl::Duration delay) : upstream_(upstream), delay_(delay) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "relay: cannot listen";
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~SlowRelay() {
    shutdown(listen_fd_, SHUT_RDWR);  // ends accept()
    acceptor_.join();
    for (auto& t : relays_) t.join();
    close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  void Accept() {
    for (int client; (client = accept(listen_fd_, nullptr, nullptr)) >= 0;) {
      relays_.emplace_back([this, client] { Relay(client); });
    }
  }
  void Relay(int client) {
    absl::SleepFor(delay_);
    int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(upstream_));
    if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      char buf[16384];
      for (bool open = true; open && poll(fds, 2, -1) > 0;) {
        for (int i = 0; i < 2 && open; ++i) {
          if (fds[i].revents == 0) continue;
          ssize_t n = read(fds[i].fd, buf, sizeof buf);
          open = n > 0 && write(fds[1 - i].fd, buf, static_cast<size_t>(n)) == n;
        }
      }
    }
    close(server);
    close(client);
  }

  int upstream_;
  absl::Duration delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // only the acceptor thread adds
};

// A connection attempt may take as long as a slow handshake needs: with the
// old 200 ms connect deadline every attempt through this relay timed out
// ("timed out before receiving SETTINGS frame") and the call failed
// UNAVAILABLE, which the controller reads as a lost agent.
TEST_F(MutualTlsTest, ASlowHandshakeStillConnects) {
  auto client = ca_->Issue("crest-controller");
  CREST_ASSERT_OK(client);
  SlowRelay relay(port_, absl::Seconds(1));
  auto channel = MakeChannel("127.0.0.1:" + std::to_string(relay.port()),
                             {false, client->cert, client->key, ca_->ca_file(), ""});
  CREST_ASSERT_OK(channel);
  auto stub = grpc::health::v1::Health::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status status = stub->Check(&ctx, {}, &resp);
  EXPECT_TRUE(status.ok()) << status.error_message();
  server_->Shutdown(std::chrono::system_clock::now());  // closes the relayed connection
}

TEST_F(MutualTlsTest, ClientWithCertificateFromTheSameCaIsServed) {
  auto client = ca_->Issue("crest-controller");
  CREST_ASSERT_OK(client);
  EXPECT_TRUE(Check({false, client->cert, client->key, ca_->ca_file(), ""}).ok());
}

TEST_F(MutualTlsTest, ClientWithCertificateFromAnotherCaIsRefused) {
  auto other_ca = TestCa::Create(dir_.path(), "rogue");
  CREST_ASSERT_OK(other_ca);
  auto client = other_ca->Issue("intruder");
  CREST_ASSERT_OK(client);
  // The client trusts the real CA (so it would accept the server) but presents
  // a certificate the server cannot verify.
  grpc::Status status = Check({false, client->cert, client->key, ca_->ca_file(), ""});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(MutualTlsTest, ClientWithoutCertificateIsRefused) {
  grpc::SslCredentialsOptions ssl;
  auto ca_pem = ReadFileToString(ca_->ca_file());
  CREST_ASSERT_OK(ca_pem);
  ssl.pem_root_certs = *ca_pem;
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::SslCredentials(ssl));
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status status = stub->Check(&ctx, {}, &resp);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(MutualTlsTest, PlaintextClientIsRefused) {
  grpc::Status status = Check({true, "", "", "", ""});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(MutualTlsTest, ClientRejectsServerFromAnotherCa) {
  auto other_ca = TestCa::Create(dir_.path(), "other");
  CREST_ASSERT_OK(other_ca);
  auto client = other_ca->Issue("client");
  CREST_ASSERT_OK(client);
  // Trusting only the other CA, the client must not accept the real server.
  grpc::Status status = Check({false, client->cert, client->key, other_ca->ca_file(), ""});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(TlsOptionsTest, IncompleteOrConflictingFlagsAreRejected) {
  EXPECT_THAT(ValidateTlsOptions({false, "", "", "", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("--tls-ca")));
  EXPECT_THAT(ValidateTlsOptions({true, "c.pem", "", "", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("--insecure")));
  EXPECT_THAT(
      ValidateTlsOptions(
          {false, "/nonexistent/c.pem", "/nonexistent/k.pem", "/nonexistent/ca.pem", ""}),
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("/nonexistent/c.pem")));
  CREST_EXPECT_OK(ValidateTlsOptions({true, "", "", "", ""}));
}

TEST(TlsOptionsTest, NonPemFileIsNamed) {
  TempDir dir;
  CREST_ASSERT_OK(WriteFileAtomically(dir.File("junk.pem"), "hello"));
  EXPECT_THAT(ValidateTlsOptions(
                  {false, dir.File("junk.pem"), dir.File("junk.pem"), dir.File("junk.pem"), ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("not a PEM file")));
}

TEST(LoopbackTest, RecognisesLoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:50051"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.2:1"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:80"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:9000"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:50051"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:50051"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:50051"));
}

}  // namespace
}  // namespace crest
