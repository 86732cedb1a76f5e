// A server's SSE stream, read in network chunks of any size. The first byte
// picks the API and where the stream is split. Invariants: the events and the
// reply's token counts are the same whatever the split.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen/sse_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

struct Outcome {
  std::vector<std::string> events;
  crest::loadgen::ReplyState state;
  bool partial = false;
};

Outcome Read(crest::v1::BenchmarkApi api, std::string_view stream, size_t chunk) {
  Outcome out;
  crest::loadgen::SseFramer framer;
  for (size_t pos = 0; pos < stream.size(); pos += chunk) {
    const bool go_on = framer.Feed(stream.substr(pos, chunk), [&](std::string_view event) {
      out.events.emplace_back(event);
      return crest::loadgen::HandleStreamEvent(api, event, out.state);
    });
    if (!go_on) break;
  }
  out.partial = framer.HasPartialEvent();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto api =
      (data[0] & 1) != 0 ? crest::v1::BENCHMARK_API_OPENAI : crest::v1::BENCHMARK_API_MINDIE;
  const size_t chunk = 1 + (data[0] >> 1) % 7;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = Read(api, stream, stream.size() + 1);
  const Outcome split = Read(api, stream, chunk);
  CREST_FUZZ_CHECK(whole.events == split.events);
  CREST_FUZZ_CHECK(whole.state.token_events == split.state.token_events);
  CREST_FUZZ_CHECK(whole.state.usage_output == split.state.usage_output);
  CREST_FUZZ_CHECK(whole.state.failure == split.state.failure);
  CREST_FUZZ_CHECK(whole.partial == split.partial);
  // A whole body read as a non-streaming reply must not crash either.
  crest::loadgen::ReplyState text_state;
  (void)crest::loadgen::HandleTextBody(api, stream, text_state);
  return 0;
}
