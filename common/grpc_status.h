// The absl::Status <-> grpc::Status mapping used at every gRPC edge (service
// handlers and client stubs). Kept apart from common/status.h so that code
// without a gRPC edge does not compile against grpcpp.
#pragma once

#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"

namespace crest {

// Longest status message sent to a peer; the rest is cut.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// The codes are numerically equal in both libraries; messages are kept, cut
// to kMaxStatusMessageBytes on the way out.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace crest
