#include "agent/daemon_pid_record.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "common/file_util.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::agent {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Subprocess> StartSleep() {
  SpawnOptions options;
  options.argv = {"/bin/sleep", "60"};
  auto child = Subprocess::Spawn(options);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : nullptr;
}

TEST(DaemonPidRecord, ARecordedDaemonThatStillRunsIsKilled) {
  crest::testing::TempDir dir;
  auto child = StartSleep();
  ASSERT_NE(child, nullptr);
  std::string path = dir.File("daemon-pid.json");
  CREST_ASSERT_OK(WriteDaemonPidRecord(path, child->pid(), "/bin/sleep"));
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kKilled);
  auto info = child->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->signal, SIGKILL);
}

TEST(DaemonPidRecord, APidNowUsedByAnotherProcessIsLeftAlone) {
  crest::testing::TempDir dir;
  auto child = StartSleep();
  ASSERT_NE(child, nullptr);
  std::string path = dir.File("daemon-pid.json");
  CREST_ASSERT_OK(WriteDaemonPidRecord(path, child->pid(), "/bin/sleep"));
  // Same pid, another start time: the recorded daemon died and the pid was reused.
  auto j = nlohmann::json::parse(*ReadFileToString(path));
  j["start_time"] = j["start_time"].get<uint64_t>() - 1;
  CREST_ASSERT_OK(WriteFileAtomically(path, j.dump()));
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kRecycled);
  // From another boot: left alone too.
  j = nlohmann::json::parse(*ReadFileToString(path));
  j["start_time"] = *ProcessStartTime(child->pid());
  j["boot_id"] = "00000000-0000-0000-0000-000000000000";
  CREST_ASSERT_OK(WriteFileAtomically(path, j.dump()));
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kOtherBoot);
  EXPECT_FALSE(child->WaitFor(absl::ZeroDuration()).has_value());  // still running
}

TEST(DaemonPidRecord, WhatTheDeadDaemonLeftInItsGroupIsKilled) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  crest::testing::TempDir dir;
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "sleep 60 & echo started; wait"};
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  std::string out;
  while (!absl::StrContains(out, "started")) {
    pollfd p{(*child)->output_fd(), POLLIN, 0};
    ::poll(&p, 1, 1000);
    ASSERT_TRUE((*child)->ReadAvailable(&out));
  }
  pid_t leader = (*child)->pid();
  std::string path = dir.File("daemon-pid.json");
  CREST_ASSERT_OK(WriteDaemonPidRecord(path, leader, "/bin/sh"));
  // Only the leader dies (as by the parent-death signal); its sleep stays.
  ASSERT_EQ(::kill(leader, SIGKILL), 0);
  ASSERT_TRUE((*child)->WaitFor(absl::Seconds(10)).has_value());
  ASSERT_TRUE(ProcessGroupExists(leader));
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kGone);
  // The orphaned sleep was reparented to this subreaper: reap it.
  int status = 0;
  pid_t reaped = ::waitpid(-1, &status, 0);
  EXPECT_GT(reaped, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(ProcessGroupExists(leader));
  ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

TEST(DaemonPidRecord, GarbageIsIgnoredAndAFailedWriteNamesTheFile) {
  crest::testing::TempDir dir;
  std::string path = dir.File("daemon-pid.json");
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kUnreadable);
  CREST_ASSERT_OK(WriteFileAtomically(path, R"({"pid": 1, "start_time": 0})"));
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kUnreadable);  // never init
  CREST_ASSERT_OK(WriteFileAtomically(path, "not json"));
  EXPECT_EQ(StopRecordedDaemon(path), RecordedDaemon::kUnreadable);
  absl::Status refused = WriteDaemonPidRecord("/dev/null/daemon-pid.json", ::getpid(), "x");
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("recording the daemon pid in /dev/null/"));
}

}  // namespace
}  // namespace crest::agent
