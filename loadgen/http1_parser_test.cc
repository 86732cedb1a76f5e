#include "loadgen/http1_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace crest::loadgen {
namespace {

using Result = Http1ResponseParser::Result;

struct Recorder final : Http1Sink {
  bool OnStatus(int code) override {
    statuses.push_back(code);
    return true;
  }
  bool OnBody(std::string_view data) override {
    body.append(data);
    ++pieces;
    return !abort_body;
  }
  std::vector<int> statuses;
  std::string body;
  int pieces = 0;
  bool abort_body = false;
};

// Feeds `wire` in pieces of `step` bytes; returns the last result and how
// many bytes were consumed in all.
Result FeedInSteps(Http1ResponseParser& p, std::string_view wire, size_t step, Recorder& sink,
                   size_t* total) {
  *total = 0;
  Result r = Result::kNeedMore;
  for (size_t pos = 0; pos < wire.size(); pos += step) {
    size_t consumed = 0;
    const std::string_view piece = wire.substr(pos, step);
    r = p.Feed(piece, &consumed, sink);
    *total += consumed;
    if (r != Result::kNeedMore) break;
  }
  return r;
}

constexpr std::string_view kChunkedSse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "f\r\ndata: {\"a\":1}\n\n\r\n"
    "10;ext=1\r\ndata: [DONE]\n\n\n\n\r\n"
    "0\r\nX-Trailer: y\r\n\r\n";

TEST(Http1ParserTest, ChunkedBodyIsTheSameAtEverySplit) {
  for (size_t step = 1; step <= kChunkedSse.size(); ++step) {
    Http1ResponseParser p;
    Recorder sink;
    size_t total = 0;
    ASSERT_EQ(FeedInSteps(p, kChunkedSse, step, sink, &total), Result::kComplete) << step;
    EXPECT_EQ(total, kChunkedSse.size()) << step;
    EXPECT_EQ(sink.statuses, std::vector<int>{200});
    EXPECT_EQ(sink.body, "data: {\"a\":1}\n\ndata: [DONE]\n\n\n\n") << step;
    EXPECT_TRUE(p.keep_alive());
  }
}

TEST(Http1ParserTest, ContentLengthBodyAndBytesPastTheResponse) {
  const std::string wire =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
  Http1ResponseParser p;
  Recorder sink;
  size_t consumed = 0;
  EXPECT_EQ(p.Feed(wire, &consumed, sink), Result::kComplete);
  EXPECT_EQ(consumed, wire.size() - 5);
  EXPECT_EQ(sink.statuses, std::vector<int>{503});
  EXPECT_EQ(sink.body, "hello");
}

TEST(Http1ParserTest, EmptyBodiesComplete) {
  for (std::string_view wire : {std::string_view("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
                                std::string_view("HTTP/1.1 204 No Content\r\n\r\n")}) {
    Http1ResponseParser p;
    Recorder sink;
    size_t consumed = 0;
    EXPECT_EQ(p.Feed(wire, &consumed, sink), Result::kComplete) << wire;
    EXPECT_EQ(consumed, wire.size());
  }
}

TEST(Http1ParserTest, InterimResponsesAreSkipped) {
  const std::string wire =
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  Http1ResponseParser p;
  Recorder sink;
  size_t consumed = 0;
  EXPECT_EQ(p.Feed(wire, &consumed, sink), Result::kComplete);
  EXPECT_EQ(sink.statuses, std::vector<int>{200});
  EXPECT_EQ(sink.body, "ok");
}

TEST(Http1ParserTest, BodyToTheEndOfTheConnection) {
  Http1ResponseParser p;
  Recorder sink;
  size_t consumed = 0;
  EXPECT_EQ(p.Feed("HTTP/1.0 200 OK\r\n\r\npart", &consumed, sink), Result::kNeedMore);
  EXPECT_FALSE(p.keep_alive());
  EXPECT_EQ(p.Eof(), Result::kComplete);
  EXPECT_EQ(sink.body, "part");
}

TEST(Http1ParserTest, ConnectionHeaders) {
  Http1ResponseParser p;
  Recorder sink;
  size_t consumed = 0;
  EXPECT_EQ(
      p.Feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", &consumed, sink),
      Result::kComplete);
  EXPECT_FALSE(p.keep_alive());
  p.Reset();
  EXPECT_EQ(p.Feed("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                   &consumed, sink),
            Result::kComplete);
  EXPECT_TRUE(p.keep_alive());
}

TEST(Http1ParserTest, EndOfConnectionInsideAResponseIsAnError) {
  Http1ResponseParser p;
  Recorder sink;
  EXPECT_EQ(p.Eof(), Result::kError);
  EXPECT_FALSE(p.started());
  p.Reset();
  size_t consumed = 0;
  EXPECT_EQ(p.Feed("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", &consumed, sink),
            Result::kNeedMore);
  EXPECT_TRUE(p.in_body());
  EXPECT_EQ(p.Eof(), Result::kError);
  p.Reset();
  EXPECT_EQ(
      p.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", &consumed, sink),
      Result::kNeedMore);
  EXPECT_EQ(p.Eof(), Result::kError);
}

// Beast checks the header fields once the header is complete, and a chunk's
// framing once the next chunk-size line is, so some cases end with the blank
// line or the following chunk.
TEST(Http1ParserTest, MalformedInputIsAnError) {
  for (std::string_view wire : {
           std::string_view("SSH-2.0-OpenSSH\r\n"),
           std::string_view("HTTP/1.1 abc OK\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nno colon here\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
           std::string_view("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
           std::string_view(
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n"),
       }) {
    Http1ResponseParser p;
    Recorder sink;
    size_t consumed = 0;
    EXPECT_EQ(p.Feed(wire, &consumed, sink), Result::kError) << wire;
    EXPECT_FALSE(p.error().empty());
  }
  Http1ResponseParser p;
  Recorder sink;
  size_t consumed = 0;
  EXPECT_EQ(p.Feed(std::string(20000, 'x'), &consumed, sink), Result::kError);
}

TEST(Http1ParserTest, TheSinkCanAbort) {
  Http1ResponseParser p;
  Recorder sink;
  sink.abort_body = true;
  size_t consumed = 0;
  EXPECT_EQ(p.Feed("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd", &consumed, sink),
            Result::kAborted);
  EXPECT_EQ(sink.body, "abcd");
}

}  // namespace
}  // namespace crest::loadgen
