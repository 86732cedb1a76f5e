// Which part of a model's campaign a trial belongs to: its search, the
// calibration at the answer, the rate search, or a fleet's confirmation.
// Everything that reads the search's points (the strategies, the answer,
// the report's tables and curve) reads search runs only.
#pragma once

#include "crest/v1/controller.pb.h"

namespace crest::controller {

inline bool IsSearchRun(const crest::v1::Trial& t) {
  return !t.calibration() && !t.rate_search() && !t.confirmation();
}

}  // namespace crest::controller
