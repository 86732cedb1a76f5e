// Ranges MindIE documents for the ScheduleConfig keys Crest writes, shared by
// the agent (which refuses values outside them) and the controller (which
// derives values and must stay inside them).
#pragma once

#include <cstdint>

namespace crest {

// prefillTimeMsPerReq and decodeTimeMsPerReq: whole milliseconds in [0, 1000].
inline constexpr int64_t kMaxSelectBatchTimeMs = 1000;

}  // namespace crest
