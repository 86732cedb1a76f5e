// Time seam: production code asks a Clock, tests hand in a FakeClock
// (common/testing/fake_clock.h) and move time by hand.
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace crest {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace crest
