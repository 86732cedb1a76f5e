// What comes back on a connection to the benchmarked server. The first byte
// picks where the bytes are split. Invariants: status, body, result and the
// bytes consumed do not depend on the split.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loadgen/http1_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using crest::loadgen::Http1ResponseParser;

struct Recorder final : crest::loadgen::Http1Sink {
  bool OnStatus(int code) override {
    statuses.push_back(code);
    return true;
  }
  bool OnBody(std::string_view data) override {
    body.append(data);
    return true;
  }
  std::vector<int> statuses;
  std::string body;
};

struct Outcome {
  Http1ResponseParser::Result result = Http1ResponseParser::Result::kNeedMore;
  size_t consumed = 0;
  std::vector<int> statuses;
  std::string body;
};

Outcome Read(std::string_view wire, size_t chunk) {
  Outcome out;
  Http1ResponseParser parser;
  Recorder sink;
  for (size_t pos = 0; pos < wire.size(); pos += chunk) {
    size_t consumed = 0;
    out.result = parser.Feed(wire.substr(pos, chunk), &consumed, sink);
    CREST_FUZZ_CHECK(consumed <= std::min(chunk, wire.size() - pos));
    out.consumed += consumed;
    if (out.result != Http1ResponseParser::Result::kNeedMore) break;
  }
  if (out.result == Http1ResponseParser::Result::kNeedMore) out.result = parser.Eof();
  if (out.result == Http1ResponseParser::Result::kError) CREST_FUZZ_CHECK(!parser.error().empty());
  out.statuses = sink.statuses;
  out.body = sink.body;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 13;
  const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = Read(wire, wire.size() + 1);
  const Outcome split = Read(wire, chunk);
  CREST_FUZZ_CHECK(whole.result == split.result);
  CREST_FUZZ_CHECK(whole.statuses == split.statuses);
  if (whole.result == Http1ResponseParser::Result::kComplete) {
    CREST_FUZZ_CHECK(whole.body == split.body);
    CREST_FUZZ_CHECK(whole.consumed == split.consumed);
  }
  return 0;
}
