// A failed write of state is never ignored: the first one is kept, the
// campaign it concerned fails, every later change is refused, and a restart
// over the store resumes from exactly what was written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/synchronization/notification.h"

#include "common/testing/status_matchers.h"
#include "controller/state_writer.h"
#include "controller/testing/manager_fixture.h"

namespace crest::controller::testing {
namespace {

using crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The practice's search on one node with host tuning. Its writes of state:
// 1 the campaign, 2 its start, 3 npuBlockNum, 4 trial 435 running (and the
// node tuned), 5 its result, 6-7 trial 500, 8-9 trial 600, 10 the search
// done, 11 the node restored, 12 the campaign's end.
constexpr char kDiskSpec[] = R"(name: disk
models: [{name: m}]
client: {request_count: 1000}
host: {thp: always}
)";
constexpr int kDiskWrites = 12;

Batch CampaignBatch(const std::string& id) {
  Batch batch;
  crest::v1::Campaign c;
  c.set_id(id);
  c.set_state(crest::v1::CAMPAIGN_PENDING);
  batch.campaigns.push_back(c);
  return batch;
}

TEST(StateWriter, KeepsTheFirstFailureAndRefusesEveryLaterWrite) {
  crest::testing::TempDir dir;
  auto store = Store::Open(dir.path());
  CREST_ASSERT_OK(store);
  FailingStore failing(store->get(), /*fail_at=*/2);
  StateWriter writer(&failing);
  CREST_EXPECT_OK(writer.Apply(CampaignBatch("c1"), "campaign c1"));
  CREST_EXPECT_OK(writer.error());
  EXPECT_THAT(writer.Apply(CampaignBatch("c2"), "campaign c2"),
              StatusIs(absl::StatusCode::kInternal,
                       "recording campaign c2: disk I/O error (injected at write 2)"));
  // Refused with the first error, without reaching the store.
  EXPECT_THAT(writer.Apply(CampaignBatch("c3"), "campaign c3"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "controller state store failed: recording campaign c2: disk I/O error "
                       "(injected at write 2); restart the controller once the disk is fixed"));
  EXPECT_EQ(failing.writes(), 2);
  EXPECT_THAT(writer.error(), StatusIs(absl::StatusCode::kInternal, HasSubstr("campaign c2")));
  CREST_EXPECT_OK(writer.ApplyDespiteError(CampaignBatch("c4")));
  auto snap = (*store)->Load();
  CREST_ASSERT_OK(snap);
  ASSERT_EQ(snap->campaigns.size(), 2u);
  EXPECT_EQ(snap->campaigns[0].campaign.id(), "c1");
  EXPECT_EQ(snap->campaigns[1].campaign.id(), "c4");
}

// (which write fails, whether every later one fails too)
class PersistenceFailureTest : public ManagerFixture,
                               public ::testing::WithParamInterface<std::tuple<int, bool>> {
 protected:
  // The trials of c1 as the store holds them, read through a store of its own.
  std::vector<crest::v1::Trial> StoredTrials() {
    auto store = Store::Open(dir_.path());
    EXPECT_TRUE(store.ok()) << store.status();
    auto snap = (*store)->Load();
    EXPECT_TRUE(snap.ok()) << snap.status();
    for (auto& c : snap->campaigns) {
      if (c.campaign.id() == "c1") return c.trials;
    }
    return {};
  }
};

class StateWritesTest : public ManagerFixture {};

TEST_F(StateWritesTest, ThePracticeCampaignMakesTheWritesTheFailureTestsCount) {
  AddAgent("a")->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  CREST_ASSERT_OK(manager_->Create(Spec(kDiskSpec)));
  ASSERT_TRUE(WaitForState("c1", crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_EQ(failing_->writes(), kDiskWrites);
  CREST_EXPECT_OK(manager_->persistence_error());
}

TEST_P(PersistenceFailureTest, FailsTheCampaignRefusesChangesAndARestartResumes) {
  const auto [fail_at, and_after] = GetParam();
  CloseManager();
  OpenManager(fail_at, and_after);
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  absl::Notification reported;
  manager_->SetOnPersistenceError([&reported](const absl::Status&) { reported.Notify(); });
  CREST_ASSERT_OK(manager_->Start());
  const std::string injected = absl::StrCat("disk I/O error (injected at write ", fail_at, ")");

  auto created = manager_->Create(Spec(kDiskSpec));
  if (fail_at == 1) {
    EXPECT_THAT(created, StatusIs(absl::StatusCode::kInternal,
                                  absl::StrCat("recording the campaign: ", injected)));
    EXPECT_TRUE(manager_->List().empty());
  } else {
    CREST_ASSERT_OK(created);
    ASSERT_TRUE(WaitForState("c1", crest::v1::CAMPAIGN_FAILED));
    EXPECT_THAT(manager_->Get("c1")->reason(),
                AllOf(HasSubstr("controller state store failed: recording "), HasSubstr(injected)));
    EXPECT_THAT(manager_->Cancel("c1"),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("controller state store failed: recording ")));
  }
  if (fail_at == 5) {  // the result of trial 435: shown as it ended, said to be unrecorded
    auto trials = Trials("c1");
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_EQ(trials[0].status(), crest::v1::TRIAL_OK);
    EXPECT_THAT(trials[0].reason(), HasSubstr("not recorded: recording trial c1-t1: " + injected));
  }
  EXPECT_THAT(manager_->Create(Spec(kDiskSpec)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("controller state store failed: "), HasSubstr(injected),
                             HasSubstr("restart the controller once the disk is fixed"))));
  EXPECT_THAT(manager_->persistence_error(), StatusIs(absl::StatusCode::kInternal));
  EXPECT_TRUE(reported.WaitForNotificationWithTimeout(kWait));

  // The disk is fixed; a restart has only what was written.
  CloseManager();
  const std::vector<crest::v1::Trial> written = StoredTrials();
  OpenManager();
  AddAgent("a");
  CREST_ASSERT_OK(manager_->Start());
  if (fail_at == 1) {
    EXPECT_TRUE(manager_->List().empty());
    return;
  }
  if (and_after) {
    // The campaign's failure was not written either: it resumes.
    ASSERT_TRUE(WaitForState("c1", crest::v1::CAMPAIGN_SUCCEEDED));
    EXPECT_EQ(manager_->Report("c1")->models(0).best().parameters().max_batch_size(), 500);
  } else {
    auto c = manager_->Get("c1");
    EXPECT_EQ(c->state(), crest::v1::CAMPAIGN_FAILED);
    EXPECT_THAT(c->reason(), HasSubstr(injected));
  }
  auto trials = Trials("c1");
  ASSERT_GE(trials.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(trials[i].id(), written[i].id());
    EXPECT_EQ(trials[i].status(),
              IsFinal(written[i].status()) ? written[i].status() : crest::v1::TRIAL_INTERRUPTED);
  }
  std::set<std::string> ids;
  std::map<std::pair<int64_t, uint32_t>, int> ok;
  for (const auto& t : trials) {
    EXPECT_TRUE(ids.insert(t.id()).second) << t.id();
    if (t.status() == crest::v1::TRIAL_OK) ++ok[{t.parameters().max_batch_size(), t.repeat()}];
  }
  for (const auto& [point, count] : ok) EXPECT_EQ(count, 1) << point.first;
  if (and_after) {
    EXPECT_EQ(ok.size(), 3u);  // 435, 500, 600: each measured once
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWrite, PersistenceFailureTest,
                         ::testing::Combine(::testing::Range(1, kDiskWrites + 1),
                                            ::testing::Bool()));

}  // namespace
}  // namespace crest::controller::testing
