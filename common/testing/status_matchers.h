// GoogleTest matchers for absl::Status / StatusOr (absent from Abseil 20220623).
#pragma once

#include <gmock/gmock.h>

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace crest::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s;
  return s.ok();
}

MATCHER_P(StatusIs, code, "has code " + ::testing::PrintToString(code)) {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher, "has code and message") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

}  // namespace crest::testing

#define CREST_ASSERT_OK(expr) ASSERT_THAT((expr), ::crest::testing::IsOk())
#define CREST_EXPECT_OK(expr) EXPECT_THAT((expr), ::crest::testing::IsOk())
