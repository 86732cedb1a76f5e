#include "cli/rpc_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"

namespace crest::cli {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Parses `args` (after the program name) into `app`.
void ParseEndpointArgs(CLI::App& app, std::vector<std::string> args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
}

TEST(OutputFormat, TextAndJsonOnly) {
  EXPECT_EQ(ParseOutputFormat("text").value(), OutputFormat::kText);
  EXPECT_EQ(ParseOutputFormat("json").value(), OutputFormat::kJson);
  EXPECT_THAT(ParseOutputFormat("yaml"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  "--output \"yaml\": expected text or json"));
  // Scripts spell it as the help says; no case folding.
  EXPECT_THAT(ParseOutputFormat("JSON"), Not(IsOk()));
  EXPECT_THAT(ParseOutputFormat(""), Not(IsOk()));
}

TEST(OutputFormat, FlagDefaultsToTextAndRefusesOtherValuesAtParse) {
  {
    CLI::App app;
    OutputFormat format = OutputFormat::kJson;  // overwritten only when given
    AddOutputFlag(app, &format);
    ParseEndpointArgs(app, {});
    EXPECT_EQ(format, OutputFormat::kJson);
  }
  {
    CLI::App app;
    OutputFormat format = OutputFormat::kText;
    AddOutputFlag(app, &format);
    ParseEndpointArgs(app, {"--output", "json"});
    EXPECT_EQ(format, OutputFormat::kJson);
  }
  CLI::App app;
  OutputFormat format = OutputFormat::kText;
  AddOutputFlag(app, &format);
  try {
    ParseEndpointArgs(app, {"--output", "yaml"});
    ADD_FAILURE() << "--output yaml parsed";
  } catch (const CLI::ValidationError& e) {
    EXPECT_STREQ(e.what(), "--output \"yaml\": expected text or json");
  }
  EXPECT_EQ(format, OutputFormat::kText);
  EXPECT_THAT(app.help(), HasSubstr("text | json"));
}

TEST(EndpointFlags, BindAddressTlsAndTimeout) {
  CLI::App app;
  Endpoint endpoint(kAgentPeer);
  AddEndpointFlags(app, &endpoint, kQueryTimeout);
  ParseEndpointArgs(app, {"--agent", "10.0.0.1:50052", "--tls-cert", "c.pem", "--tls-key", "k.pem",
                          "--tls-ca", "ca.pem", "--tls-server-name", "node-1", "--timeout", "2.5"});
  EXPECT_EQ(endpoint.address, "10.0.0.1:50052");
  EXPECT_EQ(endpoint.tls.cert_file, "c.pem");
  EXPECT_EQ(endpoint.tls.key_file, "k.pem");
  EXPECT_EQ(endpoint.tls.ca_file, "ca.pem");
  EXPECT_EQ(endpoint.tls.server_name_override, "node-1");
  EXPECT_FALSE(endpoint.tls.insecure);
  EXPECT_EQ(endpoint.timeout, absl::Milliseconds(2500));
}

TEST(EndpointFlags, AddressIsRequiredAndNamedByThePeer) {
  CLI::App app;
  Endpoint endpoint(kControllerPeer);
  AddEndpointFlags(app, &endpoint, kQueryTimeout);
  EXPECT_THROW(ParseEndpointArgs(app, {"--insecure"}), CLI::RequiredError);
  CLI::App health;
  Endpoint server(kHealthPeer);
  AddEndpointFlags(health, &server, kHealthTimeout);
  ParseEndpointArgs(health, {"--address=127.0.0.1:1", "--insecure", "--timeout=3"});
  EXPECT_EQ(server.address, "127.0.0.1:1");
  EXPECT_TRUE(server.tls.insecure);
  EXPECT_EQ(server.timeout, absl::Seconds(3));
}

TEST(EndpointFlags, TimeoutMustBeSecondsAtLeastZero) {
  for (const char* bad : {"-1", "nan", "inf", "soon"}) {
    CLI::App app;
    Endpoint endpoint(kAgentPeer);
    AddEndpointFlags(app, &endpoint, kQueryTimeout);
    EXPECT_THROW(ParseEndpointArgs(app, {"--agent", "a:1", "--timeout", bad}), CLI::ParseError)
        << bad;
    EXPECT_EQ(endpoint.timeout, absl::ZeroDuration()) << bad;
  }
  CLI::App app;
  Endpoint endpoint(kAgentPeer);
  AddEndpointFlags(app, &endpoint, kChangeTimeout);
  ParseEndpointArgs(app, {"--agent", "a:1", "--timeout", "0"});
  EXPECT_EQ(endpoint.timeout, absl::ZeroDuration());
  // --help shows the command's own default.
  EXPECT_THAT(app.help(), HasSubstr("--timeout FLOAT=60 "));
}

TEST(CallTimeout, TheFlagWhenGivenElseTheCallsDefault) {
  EXPECT_EQ(CallTimeout(absl::ZeroDuration(), kQueryTimeout), kQueryTimeout);
  EXPECT_EQ(CallTimeout(absl::Seconds(2), kQueryTimeout), absl::Seconds(2));
  EXPECT_EQ(CallTimeout(absl::ZeroDuration(), kWatchTimeout), absl::Hours(24));
}

TEST(OpenChannel, RefusesWhatTheFlagsGetWrongBeforeAnyNetwork) {
  Endpoint endpoint(kAgentPeer);
  endpoint.tls.insecure = true;
  EXPECT_THAT(OpenChannel(endpoint),
              StatusIs(absl::StatusCode::kInvalidArgument, "--agent: required (host:port)"));
  endpoint.address = "127.0.0.1:1";
  endpoint.tls.insecure = false;
  endpoint.tls.cert_file = "/nonexistent/tls.crt";
  EXPECT_THAT(OpenChannel(endpoint),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("TLS needs all of --tls-cert, --tls-key and --tls-ca")));
  endpoint.tls = TlsOptions{};
  endpoint.tls.insecure = true;
  EXPECT_THAT(OpenChannel(endpoint), IsOk());  // connects lazily
}

CallSite Site() { return {"campaign list", "controller", "127.0.0.1:5000", absl::Seconds(30)}; }

TEST(RpcErrorText, UnavailableSaysWhichServerCannotBeReached) {
  EXPECT_EQ(RpcErrorText(Site(), grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                              "failed to connect to all addresses")),
            "campaign list: cannot reach the controller at 127.0.0.1:5000: failed to connect to "
            "all addresses");
  CallSite node{"node info", "agent", "10.0.0.7:50052", absl::Seconds(2)};
  EXPECT_EQ(RpcErrorText(node, grpc::Status(grpc::StatusCode::UNAVAILABLE, "")),
            "node info: cannot reach the agent at 10.0.0.7:50052");
}

TEST(RpcErrorText, DeadlineNamesTheDeadlineAndTheFlag) {
  CallSite site{"node bench", "agent", "10.0.0.7:50052", absl::Milliseconds(2500)};
  EXPECT_EQ(
      RpcErrorText(site, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded")),
      "node bench: no answer from the agent at 10.0.0.7:50052 within 2.5s (see --timeout): "
      "Deadline Exceeded");
}

TEST(RpcErrorText, KeepsTheServersReasonOnOneLine) {
  std::string text = RpcErrorText(
      Site(), grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                           "crest.v1.Controller/ListCampaigns: caller CN \"node-9\" is not "
                           "allowed;\nexpected operator CN \"crest-cli\"\r\n"));
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_THAT(text, AllOf(StartsWith("campaign list: permission denied by the controller at "
                                     "127.0.0.1:5000: "),
                          HasSubstr("caller CN \"node-9\" is not allowed; expected operator")));
  EXPECT_EQ(RpcErrorText(Site(), grpc::Status(grpc::StatusCode::NOT_FOUND, "no campaign 'c42'")),
            "campaign list: not found on the controller at 127.0.0.1:5000: no campaign 'c42'");
}

TEST(RpcErrorText, OneTextPerCodeEachNamingCallAndAddress) {
  std::set<std::string> texts;
  for (int code = 1; code <= 16; ++code) {
    std::string text =
        RpcErrorText(Site(), grpc::Status(static_cast<grpc::StatusCode>(code), "why"));
    EXPECT_THAT(text, StartsWith("campaign list: ")) << code;
    EXPECT_THAT(text, HasSubstr("controller at 127.0.0.1:5000")) << code;
    EXPECT_THAT(text, ::testing::EndsWith(": why")) << code;
    texts.insert(text);
  }
  EXPECT_EQ(texts.size(), 16u);
  // A code from a newer peer still says what and where. (20: unnamed, yet a
  // value grpc::StatusCode can hold; UBSan refuses one past its range.)
  EXPECT_EQ(RpcErrorText(Site(), grpc::Status(static_cast<grpc::StatusCode>(20), "x")),
            "campaign list: gRPC code 20 from the controller at 127.0.0.1:5000: x");
}

TEST(RpcCall, UsesTheFlagsTimeoutElseTheDefaultAndKeepsTheCode) {
  Endpoint endpoint(kAgentPeer);
  endpoint.address = "a:1";
  {
    RpcCall call(endpoint, "node status", kQueryTimeout);
    EXPECT_EQ(call.site().timeout, kQueryTimeout);
    EXPECT_EQ(call.site().peer, "agent");
    EXPECT_EQ(call.site().address, "a:1");
  }
  endpoint.timeout = absl::Seconds(4);
  RpcCall call(endpoint, "node status", kQueryTimeout);
  EXPECT_EQ(call.site().timeout, absl::Seconds(4));
  absl::Status error = call.Error(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "slot 7"));
  EXPECT_THAT(error, StatusIs(absl::StatusCode::kInvalidArgument,
                              "node status: invalid argument for the agent at a:1: slot 7"));
}

}  // namespace
}  // namespace crest::cli
