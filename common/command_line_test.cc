#include "common/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace crest {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Parsed {
  std::optional<int> rc;
  std::string err;
};

// Parses `args` (after the program name) with an app that has one required
// flag and one subcommand, as crest-agent and crest do, plus what `extend` adds.
Parsed Parse(std::vector<std::string> args, std::string* listen = nullptr,
             const std::function<void(CLI::App&)>& extend = nullptr) {
  CLI::App app("test program", "prog");
  std::string sink;
  app.add_option("--listen", listen != nullptr ? *listen : sink, "address")->required();
  app.add_subcommand("info", "node info");
  if (extend) extend(app);
  std::vector<std::string> storage = {"prog"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size());
  for (std::string& a : storage) argv.push_back(a.data());
  ::testing::internal::CaptureStderr();
  Parsed p;
  p.rc = ParseCommandLine(app, static_cast<int>(argv.size()), argv.data());
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(ParseCommandLineTest, UnknownFlagIsNamedBeforeMissingRequiredOne) {
  Parsed p = Parse({"--bogus"});
  EXPECT_EQ(p.rc, 2);
  EXPECT_EQ(p.err, "prog: The following argument was not expected: --bogus (see --help)\n");
}

TEST(ParseCommandLineTest, UnknownFlagAfterSubcommandIsNamed) {
  Parsed p = Parse({"--listen", "x", "info", "--bogus"});
  EXPECT_EQ(p.rc, 2);
  EXPECT_THAT(p.err, HasSubstr("--bogus"));
}

TEST(ParseCommandLineTest, MissingRequiredFlagIsOneLine) {
  Parsed p = Parse({});
  EXPECT_EQ(p.rc, 2);
  EXPECT_EQ(p.err, "prog: --listen is required (see --help)\n");
}

TEST(ParseCommandLineTest, RepeatedFlagIsOneLine) {
  Parsed p = Parse({"--listen", "a", "--listen", "b"});
  EXPECT_EQ(p.rc, 2);
  EXPECT_THAT(p.err, HasSubstr("--listen"));
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
}

TEST(ParseCommandLineTest, MultiLineValidatorMessageIsJoinedOnOneLine) {
  int level = 0;
  Parsed p = Parse({"--listen", "a", "--level", "7"}, nullptr, [&level](CLI::App& app) {
    app.add_option("--level", level)
        ->check(CLI::Validator([](const std::string&) { return std::string("too high\nmax 3"); },
                               "LEVEL"));
  });
  EXPECT_EQ(p.rc, 2);
  EXPECT_THAT(p.err, HasSubstr("too high max 3"));
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.err;
}

TEST(ParseCommandLineTest, ValidArgumentsGoOn) {
  std::string listen;
  Parsed p = Parse({"--listen", "127.0.0.1:1"}, &listen);
  EXPECT_EQ(p.rc, std::nullopt);
  EXPECT_EQ(p.err, "");
  EXPECT_EQ(listen, "127.0.0.1:1");
}

TEST(ParseCommandLineTest, HelpExitsZeroWithoutError) {
  ::testing::internal::CaptureStdout();
  Parsed p = Parse({"--help"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(p.rc, 0);
  EXPECT_THAT(out, HasSubstr("--listen"));
  EXPECT_THAT(p.err, Not(HasSubstr("required")));
}

}  // namespace
}  // namespace crest
