// One HTTP request with libcurl: GETs of the daemon's health endpoint and
// metrics, the POST of the short request that makes a daemon log its serving
// KV cache.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace crest::agent {

// Returns the HTTP status code of GET `url`, or UNAVAILABLE when no answer
// came. https: verified against `ca_file`, unverified when it is empty (the
// daemon is local; its own certificate is often self-signed).
absl::StatusOr<int> HttpGetStatus(const std::string& url, absl::Duration timeout,
                                  const std::string& ca_file);

// The body of GET `url` when it answers 200 (at most `max_bytes`);
// UNAVAILABLE when no answer came, FAILED_PRECONDITION naming the status
// otherwise. TLS as HttpGetStatus.
absl::StatusOr<std::string> HttpGetBody(const std::string& url, absl::Duration timeout,
                                        const std::string& ca_file, size_t max_bytes);

// The body of POST `url` with `json` (Content-Type: application/json) when it
// answers 200; errors as HttpGetBody's (a non-200 names the status and the
// start of the body). TLS as HttpGetStatus.
absl::StatusOr<std::string> HttpPostJson(const std::string& url, const std::string& json,
                                         absl::Duration timeout, const std::string& ca_file,
                                         size_t max_bytes);

}  // namespace crest::agent
