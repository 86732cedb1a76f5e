#include "controller/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"

#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "controller/testing/power_loss_vfs.h"

namespace crest::controller {
namespace {

using crest::testing::StatusIs;
using crest::testing::TempDir;

crest::v1::Trial MakeTrial(const std::string& id, crest::v1::TrialStatus status) {
  crest::v1::Trial t;
  t.set_id(id);
  t.set_campaign_id("c1");
  t.set_model("m");
  t.set_status(status);
  t.mutable_parameters()->set_max_batch_size(435);
  t.mutable_result()->set_generate_speed(1234.5);
  return t;
}

crest::v1::Campaign MakeCampaign() {
  crest::v1::Campaign c;
  c.set_id("c1");
  c.mutable_spec()->set_name("n");
  c.set_state(crest::v1::CAMPAIGN_RUNNING);
  c.add_models()->set_model("progress is not stored");
  return c;
}

TEST(Store, RoundTripsEverything) {
  TempDir dir;
  {
    auto store = Store::Open(dir.path());
    CREST_ASSERT_OK(store);
    Batch b;
    b.campaigns.push_back(MakeCampaign());
    b.trials.push_back(MakeTrial("c1-t1", crest::v1::TRIAL_OK));
    b.trials.push_back(MakeTrial("c1-t2", crest::v1::TRIAL_RUNNING));
    ModelState ms;
    ms.npu_block_num = 2176;
    ms.probe_node = "n1";
    ms.prior_profile = R"({"name": "fitted"})";
    ms.prior_source = "campaign c0's fit";
    ms.prior_block_num = 2000;
    ms.prior_peak = 412;
    ms.prior_curve = {{400, 2900.5}, {412, 2950.25}};
    b.models.push_back({{"c1", "m"}, ms});
    b.tuned.emplace_back("c1", "n1");
    b.tuned.emplace_back("c1", "n2");
    b.restored.emplace_back("c1", "n2");
    crest::v1::AgentInfo a;
    a.set_node_name("n1");
    a.set_address("127.0.0.1:1");
    b.agents.push_back(a);
    CREST_ASSERT_OK((*store)->Apply(b));
    EXPECT_EQ(*(*store)->NextCampaignNumber(), 2);
  }
  auto store = Store::Open(dir.path());
  CREST_ASSERT_OK(store);
  auto snap = (*store)->Load();
  CREST_ASSERT_OK(snap);
  ASSERT_EQ(snap->campaigns.size(), 1u);
  const auto& c = snap->campaigns[0];
  EXPECT_EQ(c.campaign.spec().name(), "n");
  EXPECT_EQ(c.campaign.models_size(), 0);
  ASSERT_EQ(c.trials.size(), 2u);
  EXPECT_EQ(c.trials[0].id(), "c1-t1");
  EXPECT_DOUBLE_EQ(c.trials[0].result().generate_speed(), 1234.5);
  EXPECT_EQ(c.models.at("m").npu_block_num, 2176);
  EXPECT_EQ(c.models.at("m").probe_node, "n1");
  EXPECT_EQ(c.models.at("m").prior_profile, R"({"name": "fitted"})");
  EXPECT_EQ(c.models.at("m").prior_source, "campaign c0's fit");
  EXPECT_EQ(c.models.at("m").prior_block_num, 2000);
  EXPECT_EQ(c.models.at("m").prior_peak, 412);
  EXPECT_EQ(c.models.at("m").prior_curve,
            (std::vector<std::pair<int64_t, double>>{{400, 2900.5}, {412, 2950.25}}));
  EXPECT_THAT(c.tuned, ::testing::ElementsAre("n1", "n2"));
  EXPECT_THAT(c.restored, ::testing::ElementsAre("n2"));
  ASSERT_EQ(snap->agents.size(), 1u);
  EXPECT_EQ(snap->agents[0].address(), "127.0.0.1:1");
}

TEST(Store, FinalTrialsAreImmutableAndABadBatchChangesNothing) {
  TempDir dir;
  auto store = Store::Open(dir.path());
  CREST_ASSERT_OK(store);
  Batch b;
  b.campaigns.push_back(MakeCampaign());
  b.trials.push_back(MakeTrial("c1-t1", crest::v1::TRIAL_OK));
  CREST_ASSERT_OK((*store)->Apply(b));
  Batch bad;
  bad.trials.push_back(MakeTrial("c1-t2", crest::v1::TRIAL_RUNNING));  // fine alone
  bad.trials.push_back(MakeTrial("c1-t1", crest::v1::TRIAL_INTERRUPTED));
  EXPECT_THAT((*store)->Apply(bad),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("is final")));
  auto snap = (*store)->Load();
  CREST_ASSERT_OK(snap);
  ASSERT_EQ(snap->campaigns[0].trials.size(), 1u);  // c1-t2 rolled back too
  EXPECT_EQ(snap->campaigns[0].trials[0].status(), crest::v1::TRIAL_OK);
}

TEST(Store, MigratesAnOlderSchemaKeepingData) {
  TempDir dir;
  {
    auto v1 = Store::OpenAtVersionForTest(dir.path(), 1);
    CREST_ASSERT_OK(v1);
    EXPECT_EQ(*(*v1)->SchemaVersion(), 1);
    Batch b;
    b.campaigns.push_back(MakeCampaign());
    b.trials.push_back(MakeTrial("c1-t1", crest::v1::TRIAL_OK));
    CREST_ASSERT_OK((*v1)->Apply(b));
  }
  auto store = Store::Open(dir.path());
  CREST_ASSERT_OK(store);
  EXPECT_EQ(*(*store)->SchemaVersion(), Store::kSchemaVersion);
  auto snap = (*store)->Load();
  CREST_ASSERT_OK(snap);
  EXPECT_EQ(snap->campaigns[0].trials.size(), 1u);
  // The version 2 index exists.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("controller.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE name = 'trials_by_campaign'", -1,
                     &st, nullptr);
  EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(Store, RefusesASchemaFromTheFuture) {
  TempDir dir;
  { CREST_ASSERT_OK(Store::Open(dir.path())); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("controller.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_THAT(Store::Open(dir.path()), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                ::testing::HasSubstr("schema version 99")));
}

// Killing the process proves that a transaction is all or nothing and that an
// acknowledged one is in the files; it cannot prove durability (the kernel
// keeps unsynced pages of a killed process). PowerLossVfsTest below does.
TEST(Store, EveryAcknowledgedWriteSurvivesKill9) {
  TempDir dir;
  { CREST_ASSERT_OK(Store::Open(dir.path())); }
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: write trials forever, acknowledging each committed one.
    close(pipefd[0]);
    auto store = Store::Open(dir.path());
    if (!store.ok()) _exit(3);
    for (int i = 1;; ++i) {
      Batch b;
      if (i == 1) b.campaigns.push_back(MakeCampaign());
      b.trials.push_back(MakeTrial(absl::StrCat("c1-t", i), crest::v1::TRIAL_OK));
      if (!(*store)->Apply(b).ok()) _exit(4);
      if (write(pipefd[1], &i, sizeof(i)) != sizeof(i)) _exit(5);
    }
  }
  close(pipefd[1]);
  int last = 0;
  while (last < 40) {
    ASSERT_EQ(read(pipefd[0], &last, sizeof(last)), static_cast<ssize_t>(sizeof(last)));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  // Drain acknowledgements written before the kill.
  int more = 0;
  while (read(pipefd[0], &more, sizeof(more)) == static_cast<ssize_t>(sizeof(more))) last = more;
  close(pipefd[0]);
  auto store = Store::Open(dir.path());
  CREST_ASSERT_OK(store);
  auto snap = (*store)->Load();
  CREST_ASSERT_OK(snap);
  ASSERT_EQ(snap->campaigns.size(), 1u);
  EXPECT_GE(static_cast<int>(snap->campaigns[0].trials.size()), last);
  for (int i = 0; i < last; ++i) {
    EXPECT_EQ(snap->campaigns[0].trials[i].id(), absl::StrCat("c1-t", i + 1));
  }
}

int CountRows(const std::string& file, const std::string& table) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return -1;
  }
  sqlite3_stmt* st = nullptr;
  int n = -1;
  if (sqlite3_prepare_v2(db, ("SELECT count(*) FROM " + table).c_str(), -1, &st, nullptr) ==
          SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

// Writes `n` rows, one transaction each, through a plain connection with the
// given synchronous level, cuts the power and counts the rows that survive.
int RowsSurvivingAPowerCut(const std::string& synchronous, int n) {
  TempDir dir;
  testing::PowerLossVfs vfs;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(dir.File("t.db").c_str(), &db), SQLITE_OK);
  std::string setup = "PRAGMA journal_mode=WAL; PRAGMA synchronous=" + synchronous +
                      "; CREATE TABLE t (i INTEGER);";
  EXPECT_EQ(sqlite3_exec(db, setup.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  for (int i = 0; i < n; ++i) {
    std::string insert = absl::StrCat("INSERT INTO t VALUES (", i, ")");
    EXPECT_EQ(sqlite3_exec(db, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  }
  EXPECT_TRUE(vfs.PowerCut(dir.File("after")).ok());
  sqlite3_close(db);
  return std::max(CountRows(dir.File("after/t.db"), "t"), 0);
}

// The simulation can tell: with synchronous=NORMAL (or OFF) in WAL mode,
// commits are not fsynced and a power cut loses them; with FULL none is lost.
// Without this, the next test could pass whatever the store set.
TEST(PowerLossVfsTest, DetectsCommitsThatWereNeverSynced) {
  EXPECT_EQ(RowsSurvivingAPowerCut("FULL", 20), 20);
  EXPECT_EQ(RowsSurvivingAPowerCut("NORMAL", 20), 0);
  EXPECT_EQ(RowsSurvivingAPowerCut("OFF", 20), 0);
}

TEST(PowerLossVfsTest, EveryAcknowledgedWriteOfTheStoreSurvivesAPowerCut) {
  TempDir dir;
  testing::PowerLossVfs vfs;
  auto store = Store::Open(dir.File("live"));
  CREST_ASSERT_OK(store);
  constexpr int kTrials = 25;
  for (int i = 1; i <= kTrials; ++i) {
    Batch b;
    if (i == 1) b.campaigns.push_back(MakeCampaign());
    b.trials.push_back(MakeTrial(absl::StrCat("c1-t", i), crest::v1::TRIAL_OK));
    CREST_ASSERT_OK((*store)->Apply(b));
  }
  // The power goes while the store is open: only what was fsynced remains.
  CREST_ASSERT_OK(vfs.PowerCut(dir.File("after")));
  EXPECT_GE(vfs.SyncCounts()["controller.db-wal"], kTrials);  // one fsync per commit at least
  auto after = Store::Open(dir.File("after"));
  CREST_ASSERT_OK(after);
  auto snap = (*after)->Load();
  CREST_ASSERT_OK(snap);
  ASSERT_EQ(snap->campaigns.size(), 1u);
  ASSERT_EQ(snap->campaigns[0].trials.size(), static_cast<size_t>(kTrials));
  for (int i = 0; i < kTrials; ++i) {
    EXPECT_EQ(snap->campaigns[0].trials[i].id(), absl::StrCat("c1-t", i + 1));
    EXPECT_EQ(snap->campaigns[0].trials[i].status(), crest::v1::TRIAL_OK);
  }
}

}  // namespace
}  // namespace crest::controller
