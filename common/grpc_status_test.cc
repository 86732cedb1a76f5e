#include "common/grpc_status.h"

#include <gtest/gtest.h>

namespace crest {
namespace {

TEST(StatusMapping, EveryCodeSurvivesTheRoundTrip) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status original(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why it failed");
    grpc::Status wire = ToGrpcStatus(original);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    absl::Status back = FromGrpcStatus(wire);
    EXPECT_EQ(back, original) << "code " << code;
  }
}

TEST(StatusMapping, KnownCodesMapByName) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow")).message(),
            "slow");
}

TEST(StatusMapping, HugeMessagesAreCutToFitATrailer) {
  std::string huge(3 << 20, 'x');
  grpc::Status wire = ToGrpcStatus(absl::InvalidArgumentError("key: \"" + huge + "\""));
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(wire.error_message().size(), kMaxStatusMessageBytes + 40);
  EXPECT_EQ(wire.error_message().rfind("key: \"xxx", 0), 0u);
  EXPECT_NE(wire.error_message().find("more bytes)"), std::string::npos);
  std::string fits(kMaxStatusMessageBytes, 'y');
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError(fits)).error_message(), fits);
}

}  // namespace
}  // namespace crest
