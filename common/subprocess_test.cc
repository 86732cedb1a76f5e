#include "common/subprocess.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

// Reads the child's output until `needle` appears or the pipe closes.
std::string ReadUntil(Subprocess& p, absl::string_view needle) {
  std::string out;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!absl::StrContains(out, needle) && absl::Now() < deadline) {
    if (!p.ReadAvailable(&out)) break;
    pollfd fd{p.output_fd(), POLLIN, 0};
    ::poll(&fd, 1, 100);
  }
  return out;
}

TEST(SubprocessTest, CapturesStdoutAndStderrWithEnvAndCwd) {
  crest::testing::TempDir dir;
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo out-$CREST_X; echo err-$(pwd) >&2"};
  options.env = {{"CREST_X", "42"}};
  options.cwd = dir.path();
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  std::string out = ReadUntil(**child, "err-");
  auto info = (*child)->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->code, 0);
  (*child)->ReadAvailable(&out);
  EXPECT_THAT(out, HasSubstr("out-42"));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("err-", dir.path())));
}

TEST(SubprocessTest, RunsInItsOwnProcessGroupAndKillGroupLeavesNothing) {
  SpawnOptions options;
  // The shell starts a grandchild in the same group, then both wait.
  options.argv = {"/bin/sh", "-c", "sleep 30 & echo started; wait"};
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  ReadUntil(**child, "started");
  pid_t pgid = ::getpgid((*child)->pid());
  EXPECT_EQ(pgid, (*child)->pid());
  EXPECT_NE(pgid, ::getpgid(0));
  EXPECT_TRUE(ProcessGroupExists(pgid));
  CREST_ASSERT_OK((*child)->SignalGroup(SIGKILL));
  auto info = (*child)->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->signaled);
  EXPECT_EQ(info->code, 128 + SIGKILL);
  // The grandchild is killed too; it is reaped by init, so wait for it.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ProcessGroupExists(pgid) && absl::Now() < deadline) ::usleep(10000);
  EXPECT_FALSE(ProcessGroupExists(pgid));
}

TEST(SubprocessTest, WaitForTimesOutWhileRunning) {
  SpawnOptions options;
  options.argv = {"/bin/sleep", "30"};
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  EXPECT_FALSE((*child)->WaitFor(absl::Milliseconds(50)).has_value());
  // The destructor kills and reaps it.
}

TEST(SubprocessTest, ExitCodeIsReported) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "exit 7"};
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  auto info = (*child)->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->code, 7);
  EXPECT_FALSE(info->signaled);
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  SpawnOptions options;
  options.argv = {"/nonexistent/crest-program"};
  EXPECT_THAT(Subprocess::Spawn(options), StatusIs(absl::StatusCode::kNotFound));
  options.argv = {"crest-no-such-program-on-path"};
  options.search_path = true;
  EXPECT_THAT(Subprocess::Spawn(options), StatusIs(absl::StatusCode::kNotFound));
}

TEST(SubprocessTest, BadCwdIsReported) {
  SpawnOptions options;
  options.argv = {"/bin/true"};
  options.cwd = "/nonexistent/dir";
  EXPECT_THAT(Subprocess::Spawn(options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("/nonexistent/dir")));
}

TEST(SubprocessTest, AffinityIsSetBeforeExec) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  int last = -1;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &mine)) last = i;
  }
  ASSERT_GE(last, 0);
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  options.cpus = {static_cast<uint32_t>(last)};
  auto result = RunCommand(options, absl::Seconds(10));
  CREST_ASSERT_OK(result);
  EXPECT_THAT(result->output, HasSubstr(absl::StrCat("Cpus_allowed_list:\t", last, "\n")));
}

TEST(SubprocessTest, ImpossibleAffinityFailsNamingTheStep) {
  SpawnOptions options;
  options.argv = {"/bin/true"};
  options.cpus = {CPU_SETSIZE - 1};  // No such CPU on this machine.
  EXPECT_THAT(Subprocess::Spawn(options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("CPU affinity")));
}

TEST(SubprocessTest, RunCommandTimesOut) {
  SpawnOptions options;
  options.argv = {"/bin/sleep", "30"};
  EXPECT_THAT(RunCommand(options, absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(SubprocessTest, FindOnPath) {
  EXPECT_FALSE(FindOnPath("sh").empty());
  EXPECT_TRUE(FindOnPath("crest-no-such-program-on-path").empty());
}

}  // namespace
}  // namespace crest
