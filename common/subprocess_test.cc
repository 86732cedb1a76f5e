#include "common/subprocess.h"

#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
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

std::string CommandLineOf(pid_t pid) {
  auto text = ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline"));
  return text.ok() ? *text : "";
}

TEST(SubprocessTest, BeforeExecRunsWhileTheChildHasNotExecYet) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "echo ran"};
  std::string seen;
  pid_t seen_pid = 0;
  options.before_exec = [&](pid_t pid) {
    seen_pid = pid;
    seen = CommandLineOf(pid);  // still this test binary, not the shell
    return absl::OkStatus();
  };
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  EXPECT_EQ(seen_pid, (*child)->pid());
  EXPECT_FALSE(seen.empty());
  EXPECT_THAT(seen, ::testing::Not(HasSubstr("/bin/sh")));
  EXPECT_THAT(ReadUntil(**child, "ran"), HasSubstr("ran"));
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)).has_value());
}

TEST(SubprocessTest, AFailedBeforeExecRefusesTheStartAndTheProgramNeverRuns) {
  crest::testing::TempDir dir;
  std::string marker = dir.File("ran");
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "touch " + marker};
  pid_t child_pid = 0;
  options.before_exec = [&](pid_t pid) {
    child_pid = pid;
    return absl::DataLossError("recording the pid: disk full");
  };
  EXPECT_THAT(Subprocess::Spawn(options),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("disk full")));
  ASSERT_GT(child_pid, 0);
  EXPECT_FALSE(ProcessGroupExists(child_pid));  // killed and reaped
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// The parent of a child with a parent-death signal is SIGKILLed: the kernel
// kills the child. This test process is the subreaper that reaps it.
TEST(SubprocessTest, ParentDeathSignalStopsTheChildWhenItsParentIsKilled) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  int pids[2];
  ASSERT_EQ(::pipe(pids), 0);
  pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    ::close(pids[0]);
    SpawnThread spawner;
    SpawnOptions options;
    options.argv = {"/bin/sleep", "60"};
    options.parent_death_signal = SIGKILL;
    auto child = spawner.Spawn(options);
    if (!child.ok()) ::_exit(3);
    pid_t pid = (*child)->pid();
    if (::write(pids[1], &pid, sizeof(pid)) != sizeof(pid)) ::_exit(4);
    ::pause();  // until killed, leaving the child behind
    ::_exit(0);
  }
  ::close(pids[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(::read(pids[0], &grandchild, sizeof(grandchild)),
            static_cast<ssize_t>(sizeof(grandchild)));
  ::close(pids[0]);
  ASSERT_EQ(::kill(parent, SIGKILL), 0);
  ASSERT_EQ(::waitpid(parent, nullptr, 0), parent);
  // Reparented to this subreaper; the kernel's SIGKILL ends it.
  int status = 0;
  ASSERT_EQ(::waitpid(grandchild, &status, 0), grandchild);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

TEST(SubprocessTest, SpawnThreadSpawnsManyInTurn) {
  SpawnThread spawner;
  for (int i = 0; i < 3; ++i) {
    SpawnOptions options;
    options.argv = {"/bin/sh", "-c", absl::StrCat("exit ", i)};
    auto child = spawner.Spawn(options);
    CREST_ASSERT_OK(child);
    auto info = (*child)->WaitFor(absl::Seconds(10));
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->code, i);
  }
  SpawnOptions missing;
  missing.argv = {"/no/such/program"};
  EXPECT_THAT(spawner.Spawn(missing), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace crest
