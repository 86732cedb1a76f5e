// Status helpers Abseil 20220623 lacks: early-return macros and context
// annotation. Free of gRPC: the mapping to grpc::Status for gRPC edges lives
// in common/grpc_status.h, so sim/ and loadgen/ compile without grpcpp.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define CREST_STATUS_CONCAT_INNER_(a, b) a##b
#define CREST_STATUS_CONCAT_(a, b) CREST_STATUS_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` (an absl::Status) is not OK.
#define CREST_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status crest_status_ = (expr);         \
    if (!crest_status_.ok()) return crest_status_; \
  } while (false)

// `lhs = value of expr` when expr (an absl::StatusOr) is OK, else returns its status.
#define CREST_ASSIGN_OR_RETURN(lhs, expr) \
  CREST_ASSIGN_OR_RETURN_IMPL_(CREST_STATUS_CONCAT_(crest_statusor_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` may be a declaration.
#define CREST_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

namespace crest {

// Prefixes the message with context, keeping the code: "loading x: <msg>".
absl::Status Annotate(const absl::Status& status, absl::string_view context);

// `text` from a request, as quoted in an error message: at most `max` bytes,
// then "...(N bytes)" (a hostile value may be megabytes).
std::string ClipForMessage(absl::string_view text, size_t max = 80);

}  // namespace crest
