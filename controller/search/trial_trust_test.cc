#include "controller/search/trial_trust.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace crest::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

crest::v1::Trial Finished(uint64_t succeeded, uint64_t failed) {
  crest::v1::Trial t;
  t.mutable_result()->set_succeeded(succeeded);
  t.mutable_result()->set_failed(failed);
  return t;
}

TEST(TrialTrustTest, NoResultNoFlags) { EXPECT_THAT(TrustFlags(crest::v1::Trial()), IsEmpty()); }

TEST(TrialTrustTest, ACleanRunHasNoFlags) {
  crest::v1::Trial t = Finished(1319, 0);
  t.mutable_result()->mutable_client()->set_cpu_utilisation(0.4);
  t.mutable_result()->mutable_daemon()->set_succeeded(1319);
  t.mutable_result()->mutable_daemon()->set_preemptions(0);
  EXPECT_THAT(TrustFlags(t), IsEmpty());
}

TEST(TrialTrustTest, ClientBoundRunsAreFlagged) {
  crest::v1::Trial t = Finished(100, 0);
  t.mutable_result()->mutable_client()->set_client_bound(true);
  t.mutable_result()->mutable_client()->set_client_bound_reason("cpu_utilisation 0.97 > 0.9");
  EXPECT_THAT(TrustFlags(t), ElementsAre("client_bound"));
}

TEST(TrialTrustTest, UnknownServerCountIsNotAMismatch) {
  crest::v1::Trial t = Finished(100, 0);
  t.mutable_result()->mutable_daemon()->set_error("scrape before the run: refused");
  EXPECT_THAT(TrustFlags(t), IsEmpty());
}

TEST(TrialTrustTest, CountsDisagreeBeyondTheSlack) {
  EXPECT_EQ(CountSlack(0), 2u);
  EXPECT_EQ(CountSlack(400), 2u);
  EXPECT_EQ(CountSlack(401), 3u);
  EXPECT_EQ(CountSlack(1319), 7u);
  // Fewer on the server than the client received.
  EXPECT_FALSE(CountsDisagree(1312, 1319, 0));
  EXPECT_TRUE(CountsDisagree(1311, 1319, 0));
  // More on the server: up to the client's failed (finished as the run
  // ended, abandoned by the client) plus the slack.
  EXPECT_FALSE(CountsDisagree(1326, 1319, 0));
  EXPECT_TRUE(CountsDisagree(1327, 1319, 0));
  EXPECT_FALSE(CountsDisagree(1336, 1319, 10));
  EXPECT_TRUE(CountsDisagree(1337, 1319, 10));
  EXPECT_FALSE(CountsDisagree(0, 0, 0));
  EXPECT_TRUE(CountsDisagree(3, 0, 0));
}

TEST(TrialTrustTest, BothFlagsInAFixedOrder) {
  crest::v1::Trial t = Finished(600, 0);
  t.mutable_result()->mutable_client()->set_client_bound(true);
  t.mutable_result()->mutable_daemon()->set_succeeded(1319);  // another client hit the daemon
  EXPECT_THAT(TrustFlags(t), ElementsAre("client_bound", "count_mismatch"));
}

}  // namespace
}  // namespace crest::controller
