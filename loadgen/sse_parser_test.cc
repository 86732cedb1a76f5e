#include "loadgen/sse_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace crest::loadgen {
namespace {

std::vector<std::string> FeedInPieces(const std::string& bytes, size_t piece) {
  SseFramer framer;
  std::vector<std::string> events;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    framer.Feed(std::string_view(bytes).substr(i, piece), [&](std::string_view data) {
      events.emplace_back(data);
      return true;
    });
  }
  EXPECT_FALSE(framer.HasPartialEvent());
  return events;
}

TEST(SseFramerTest, EventsSplitAcrossAndPackedIntoChunksComeOutWhole) {
  const std::string bytes =
      "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: keep-alive\n\nevent: x\ndata: [DONE]\n\n";
  for (size_t piece : {1UL, 2UL, 3UL, 5UL, 7UL, 1000UL}) {
    std::vector<std::string> events = FeedInPieces(bytes, piece);
    ASSERT_EQ(events.size(), 3U) << "piece " << piece;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "{\"b\":2}");
    EXPECT_EQ(events[2], "[DONE]");
  }
}

TEST(SseFramerTest, MultiLineDataIsJoinedAndPartialEventIsReported) {
  SseFramer framer;
  std::vector<std::string> events;
  auto sink = [&](std::string_view d) {
    events.emplace_back(d);
    return true;
  };
  framer.Feed("data: a\ndata: b\n\ndata: c", sink);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0], "a\nb");
  EXPECT_TRUE(framer.HasPartialEvent());
}

TEST(SseFramerTest, CallbackFalseStopsFeeding) {
  SseFramer framer;
  int calls = 0;
  EXPECT_FALSE(framer.Feed("data: 1\n\ndata: 2\n\n", [&](std::string_view) {
    ++calls;
    return false;
  }));
  EXPECT_EQ(calls, 1);
}

TEST(StreamEventTest, MindieTokensAndFinalDetails) {
  ReplyState st;
  EXPECT_TRUE(HandleStreamEvent(
      crest::v1::BENCHMARK_API_MINDIE,
      R"({"token":{"id":1,"text":"a"},"generated_text":null,"details":null})", st));
  EXPECT_TRUE(HandleStreamEvent(
      crest::v1::BENCHMARK_API_MINDIE,
      R"({"token":{"id":2,"text":"b"},"generated_text":"ab","details":{"finish_reason":"length","generated_tokens":2,"prompt_tokens":5}})",
      st));
  EXPECT_TRUE(HandleStreamEvent(crest::v1::BENCHMARK_API_MINDIE, "[DONE]", st));
  EXPECT_EQ(st.token_events, 2U);
  EXPECT_EQ(st.usage_output, 2);
  EXPECT_EQ(st.usage_input, 5);
  EXPECT_TRUE(st.final_seen);
  EXPECT_TRUE(st.done_seen);
  EXPECT_TRUE(st.failure.empty());
}

TEST(StreamEventTest, OpenAiChoicesAndUsage) {
  ReplyState st;
  EXPECT_TRUE(HandleStreamEvent(
      crest::v1::BENCHMARK_API_OPENAI,
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","finish_reason":null}]})",
      st));
  EXPECT_FALSE(st.final_seen);
  EXPECT_TRUE(HandleStreamEvent(
      crest::v1::BENCHMARK_API_OPENAI,
      R"({"choices":[{"index":0,"text":"y","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})",
      st));
  EXPECT_EQ(st.token_events, 2U);
  EXPECT_EQ(st.usage_output, 2);
  EXPECT_EQ(st.usage_input, 3);
  EXPECT_TRUE(st.final_seen);
}

TEST(StreamEventTest, BadEventsAreMalformedOrStreamErrors) {
  struct Case {
    crest::v1::BenchmarkApi api;
    const char* data;
    const char* reason;
  };
  for (const Case& c :
       {Case{crest::v1::BENCHMARK_API_MINDIE, "{oops", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_MINDIE, "[1,2]", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_MINDIE, R"({"foo":1})", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_OPENAI, R"({"token":{}})", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_OPENAI, R"({"error":"overloaded"})", "stream_error"},
        Case{crest::v1::BENCHMARK_API_MINDIE, R"({"token":{}} trailing)", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_MINDIE, R"("token")", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_OPENAI, R"({"choices":{}})", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_OPENAI, R"({"choices":[1]})", "malformed_sse"},
        Case{crest::v1::BENCHMARK_API_MINDIE, R"({"token":{},"error":null})", "stream_error"}}) {
    ReplyState st;
    EXPECT_FALSE(HandleStreamEvent(c.api, c.data, st)) << c.data;
    EXPECT_EQ(st.failure, c.reason) << c.data;
  }
  ReplyState st;
  ASSERT_TRUE(HandleStreamEvent(crest::v1::BENCHMARK_API_MINDIE, "[DONE]", st));
  EXPECT_FALSE(HandleStreamEvent(crest::v1::BENCHMARK_API_MINDIE, R"({"token":{}})", st));
  EXPECT_EQ(st.failure, "malformed_sse");
}

TEST(StreamEventTest, OnlyTheTopLevelMembersCount) {
  // Keys of the same names deeper in the event, and later choices, change nothing.
  ReplyState st;
  EXPECT_TRUE(HandleStreamEvent(
      crest::v1::BENCHMARK_API_MINDIE,
      R"({"token":{"details":{"generated_tokens":9},"error":1},"details":null,"x":[{"usage":{}}]})",
      st));
  EXPECT_EQ(st.token_events, 1U);
  EXPECT_FALSE(st.final_seen);
  EXPECT_EQ(st.usage_output, -1);
  ReplyState oa;
  EXPECT_TRUE(HandleStreamEvent(
      crest::v1::BENCHMARK_API_OPENAI,
      R"({"choices":[{"text":"a","finish_reason":null},{"finish_reason":"stop"}],"usage":{"completion_tokens":1.5,"prompt_tokens":4}})",
      oa));
  EXPECT_EQ(oa.token_events, 1U);
  EXPECT_FALSE(oa.final_seen);
  EXPECT_EQ(oa.usage_output, -1);  // not an integer
  EXPECT_EQ(oa.usage_input, 4);
  ReplyState empty;
  EXPECT_TRUE(HandleStreamEvent(crest::v1::BENCHMARK_API_OPENAI, R"({"choices":[]})", empty));
  EXPECT_EQ(empty.token_events, 0U);
}

TEST(TextBodyTest, BothFormatsAndErrors) {
  ReplyState mindie;
  EXPECT_TRUE(HandleTextBody(
      crest::v1::BENCHMARK_API_MINDIE,
      R"({"generated_text":"abc","details":{"finish_reason":"length","generated_tokens":3,"prompt_tokens":4}})",
      mindie));
  EXPECT_EQ(mindie.usage_output, 3);
  EXPECT_EQ(mindie.usage_input, 4);
  ReplyState openai;
  EXPECT_TRUE(HandleTextBody(
      crest::v1::BENCHMARK_API_OPENAI,
      R"({"choices":[{"index":0,"text":"abc","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10}})",
      openai));
  EXPECT_EQ(openai.usage_output, 9);
  ReplyState bad;
  EXPECT_FALSE(HandleTextBody(crest::v1::BENCHMARK_API_OPENAI, "{\"x\":1}", bad));
  EXPECT_EQ(bad.failure, "malformed_body");
  for (const char* body : {"", "{", R"({"generated_text":"a"} x)", R"(["generated_text"])",
                           R"({"details":{"generated_tokens":3}})"}) {
    ReplyState st;
    EXPECT_FALSE(HandleTextBody(crest::v1::BENCHMARK_API_MINDIE, body, st)) << body;
    EXPECT_EQ(st.failure, "malformed_body") << body;
  }
}

}  // namespace
}  // namespace crest::loadgen
