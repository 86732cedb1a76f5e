#include "controller/search/trial_trust.h"

#include <algorithm>

namespace crest::controller {

uint64_t CountSlack(uint64_t client_succeeded) {
  return std::max<uint64_t>(2, (client_succeeded + 199) / 200);
}

bool CountsDisagree(uint64_t server_succeeded, uint64_t client_succeeded, uint64_t client_failed) {
  const uint64_t slack = CountSlack(client_succeeded);
  if (server_succeeded + slack < client_succeeded) return true;
  return server_succeeded > client_succeeded + client_failed + slack;
}

std::vector<std::string> TrustFlags(const crest::v1::Trial& trial) {
  std::vector<std::string> flags;
  if (!trial.has_result()) return flags;
  const crest::v1::BenchmarkResult& r = trial.result();
  if (r.has_client() && r.client().client_bound()) flags.emplace_back(kFlagClientBound);
  if (r.has_daemon() && r.daemon().has_succeeded() &&
      CountsDisagree(r.daemon().succeeded(), r.succeeded(), r.failed())) {
    flags.emplace_back(kFlagCountMismatch);
  }
  return flags;
}

}  // namespace crest::controller
