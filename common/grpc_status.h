// The absl::Status <-> grpc::Status mapping used at every gRPC edge (service
// handlers and client stubs). Kept apart from common/status.h so that code
// without a gRPC edge does not compile against grpcpp.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace crest {

// The codes are numerically equal in both libraries; messages are kept.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace crest
