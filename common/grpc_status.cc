#include "common/grpc_status.h"

#include <string>

namespace crest {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  // A message that quotes a hostile request could be megabytes: more than a
  // trailer may carry (the caller would see a broken stream, not the error).
  if (message.size() > kMaxStatusMessageBytes) {
    size_t cut = message.size() - kMaxStatusMessageBytes;
    message.resize(kMaxStatusMessageBytes);
    message += "... (" + std::to_string(cut) + " more bytes)";
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace crest
