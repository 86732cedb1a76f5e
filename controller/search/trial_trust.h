// Measurement trust: which of a finished trial's figures cannot be read as
// the server's, as flags for Trial.flags. A flagged trial is never taken as
// evidence that throughput fell (docs/controller.md, "Measurement trust").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crest/v1/controller.pb.h"

namespace crest::controller {

// crest-bench marked the run client-bound (ClientHealth.client_bound): the
// load generator, not the server, limited it.
inline constexpr char kFlagClientBound[] = "client_bound";
// The daemon's own count of succeeded requests disagrees with the client's
// (CountsDisagree).
inline constexpr char kFlagCountMismatch[] = "count_mismatch";

// How far the daemon's count may sit from the client's without a flag: the
// counters are scraped around the measured requests, and a response the
// client has just read may be counted a moment later (or earlier) by the
// server: max(2, ceil(0.5% of the client's succeeded)).
uint64_t CountSlack(uint64_t client_succeeded);

// True when `server_succeeded` lies outside
// [client_succeeded - slack, client_succeeded + client_failed + slack]:
// the server may also have finished requests the client counted as failed
// or abandoned as the run ended (a timeout, a duration limit), but it cannot
// have finished fewer than the client received.
bool CountsDisagree(uint64_t server_succeeded, uint64_t client_succeeded, uint64_t client_failed);

// The flags of a trial with a result (none without one), in a fixed order.
std::vector<std::string> TrustFlags(const crest::v1::Trial& trial);

}  // namespace crest::controller
