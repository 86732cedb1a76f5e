#include "loadgen/reply_scan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace crest::loadgen {
namespace {

// The reference: one JSON value that is an object.
bool Reference(const std::string& text) {
  if (!nlohmann::json::accept(text)) return false;
  const size_t first =
      text.find_first_not_of(" \t\r\n", text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0);
  return first != std::string::npos && text[first] == '{';
}

bool Scans(const std::string& text) {
  ReplyFields f;
  return ScanReply(text, f);
}

const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> corpus = {
      R"({"token":{"id":1,"text":"a"},"generated_text":null,"details":null})",
      R"({"token":{"id":2,"text":"b"},"generated_text":"ab","details":{"finish_reason":"length","generated_tokens":2,"prompt_tokens":5}})",
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","finish_reason":null}]})",
      R"({"choices":[{"index":0,"text":"y","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})",
      R"({"generated_text":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t","details":{"generated_tokens":1e2}})",
      "{\"s\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
      R"(  {"a":[1,-2,3.5,-0,0.0e+1,1E-3,true,false,null,{},[],"x"]} )",
      R"({"a":{"b":{"c":[[[{"d":[]}]]]}}})",
  };
  return corpus;
}

TEST(ReplyScanTest, AgreesWithNlohmannOnHandPickedInputs) {
  std::vector<std::string> inputs = Corpus();
  for (const char* tricky : {
           "",
           " ",
           "{",
           "}",
           "{}",
           "[]",
           "\"s\"",
           "1",
           "null",
           "{} {}",
           "{},",
           "{\"a\"}",
           "{\"a\":}",
           "{\"a\":1,}",
           "{,}",
           "{\"a\" 1}",
           "{'a':1}",
           "{\"a\":01}",
           "{\"a\":-}",
           "{\"a\":1.}",
           "{\"a\":.5}",
           "{\"a\":1e}",
           "{\"a\":+1}",
           "{\"a\":tru}",
           "{\"a\":nul}",
           "{\"a\":[1,]}",
           "{\"a\":[,1]}",
           R"({"a":"\x"})",
           R"({"a":"\u12"})",
           R"({"a":"\ud800"})",
           R"({"a":"\udc00"})",
           R"({"a":"\ud800\u0041"})",
           R"({"a":"\ud83d\ude00"})",
           "{\"a\":\"tab\there\"}",
           "{\"a\":\"\x01\"}",
           "{\"a\":\"\xc0\xaf\"}",
           "{\"a\":\"\xe0\x80\xaf\"}",
           "{\"a\":\"\xed\xa0\x80\"}",
           "{\"a\":\"\xf4\x90\x80\x80\"}",
           "{\"a\":\"\xff\"}",
           "{\"a\":\"\xc3\"}",
           "{\"a\":1}\x00",
           "\xef\xbb\xbf{}",
           "{\"a\":99999999999999999999}",
           "{\"a\":-99999999999999999999}",
           R"({"a":"unterminated})",
       }) {
    inputs.emplace_back(tricky);
  }
  for (const std::string& s : inputs) EXPECT_EQ(Scans(s), Reference(s)) << "input: " << s;
}

// Every one-byte change, deletion and cut of valid replies, checked against
// the reference: the scanner accepts exactly what nlohmann accepts.
TEST(ReplyScanTest, AgreesWithNlohmannOnEveryMutation) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":,.-+0123456789eEtrufalsn \\/u\x01\x7f\xc3\xa9\xff";
  int checked = 0;
  for (const std::string& base : Corpus()) {
    for (size_t i = 0; i <= base.size(); ++i) {
      std::string cut = base.substr(0, i);
      ASSERT_EQ(Scans(cut), Reference(cut)) << "cut: " << cut;
      if (i == base.size()) break;
      std::string del = base;
      del.erase(i, 1);
      ASSERT_EQ(Scans(del), Reference(del)) << "deleted: " << del;
      for (int k = 0; k < 4; ++k) {
        std::string changed = base;
        changed[i] = alphabet[rng() % alphabet.size()];
        ASSERT_EQ(Scans(changed), Reference(changed)) << "changed: " << changed;
        std::string inserted = base;
        inserted.insert(i, 1, alphabet[rng() % alphabet.size()]);
        ASSERT_EQ(Scans(inserted), Reference(inserted)) << "inserted: " << inserted;
        checked += 2;
      }
    }
  }
  EXPECT_GT(checked, 4000);
}

TEST(ReplyScanTest, PicksOutTheMembersCrestBenchReads) {
  ReplyFields f;
  ASSERT_TRUE(ScanReply(
      R"({"token":{"id":2},"details":{"generated_tokens":2,"prompt_tokens":5},"generated_text":"ab"})",
      f));
  EXPECT_TRUE(f.token_object);
  EXPECT_TRUE(f.details_object);
  EXPECT_TRUE(f.generated_text);
  EXPECT_EQ(f.details_generated, 2);
  EXPECT_EQ(f.details_prompt, 5);
  EXPECT_FALSE(f.error);

  ReplyFields o;
  ASSERT_TRUE(ScanReply(
      R"({"choices":[{"finish_reason":"stop"},{}],"usage":{"completion_tokens":7,"prompt_tokens":1.0}})",
      o));
  EXPECT_TRUE(o.choices_array);
  EXPECT_TRUE(o.choice0_object);
  EXPECT_TRUE(o.finish_reason_string);
  EXPECT_TRUE(o.usage_object);
  EXPECT_EQ(o.usage_completion, 7);
  EXPECT_EQ(o.usage_prompt, -1);  // not an integer

  // An escaped key is the same key.
  ReplyFields e;
  ASSERT_TRUE(ScanReply(R"({"\u0065rror":null})", e));
  EXPECT_TRUE(e.error);

  // Nesting beyond 256 levels is refused rather than recursed into.
  ReplyFields deep;
  EXPECT_FALSE(ScanReply("{\"a\":" + std::string(300, '[') + std::string(300, ']') + "}", deep));
}

}  // namespace
}  // namespace crest::loadgen
