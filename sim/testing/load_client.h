// A closed-loop HTTP(S) load client on libcurl's multi interface, for
// mindie-sim's integration tests and benchmark: keeps `concurrency` requests
// in flight, counts SSE token events and the usage each reply reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crest::sim::testing {

struct LoadOptions {
  std::string url;      // e.g. http://127.0.0.1:PORT/v1/completions
  std::string ca_file;  // https: CA to verify the server with
  int concurrency = 1;
  std::vector<std::string> bodies;  // JSON request bodies, sent in order
  double timeout_seconds = 60;
};

struct LoadResult {
  int ok = 0;                     // 200 and a complete body
  int failed = 0;                 // anything else
  int64_t events = 0;             // SSE data events with a token ([DONE] excluded)
  int64_t completion_tokens = 0;  // sum of usage.completion_tokens / details.generated_tokens
  double elapsed_seconds = 0;
  std::string first_body;  // the first finished reply, for inspection
  std::string first_error;
};

LoadResult RunLoad(const LoadOptions& options);

// Raises the soft open-files limit to the hard one (1000 sockets).
void RaiseFileLimit();

}  // namespace crest::sim::testing
