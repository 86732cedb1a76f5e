// The fixture of the campaign manager's unit tests: a manager over a real
// store in a temp dir (optionally failing at a chosen write), a registry on a
// fake clock, fake agents, and waits on change notifications with a
// deadline, never on sleeps.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "common/testing/fake_clock.h"
#include "common/testing/test_ca.h"
#include "controller/campaign_io/spec_parser.h"
#include "controller/campaign_manager.h"
#include "controller/testing/failing_store.h"
#include "controller/testing/fake_agent_client.h"

namespace crest::controller::testing {

inline constexpr absl::Duration kWait = absl::Seconds(20);

// The practice's curve: rises to 500, falls at 600.
inline double PracticeCurve(int64_t b) {
  if (b <= 435) return 2845.3;
  if (b <= 500) return 2980.3;
  return 2520.6;
}

class ManagerFixture : public ::testing::Test {
 protected:
  void SetUp() override { OpenManager(); }
  void TearDown() override { CloseManager(); }

  // A manager over the store in dir_; its `fail_at`th write of state fails
  // (0: none), and with `and_after` every later one too.
  void OpenManager(int fail_at = 0, bool and_after = false) {
    auto store = Store::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    failing_ = std::make_unique<FailingStore>(store_.get(), fail_at, and_after);
    registry_ = std::make_unique<AgentRegistry>(&clock_,
                                                RegistryOptions{absl::Seconds(2), 3, time_scales_});
    ManagerOptions options;
    options.tick = absl::Milliseconds(20);
    options.probe_interval = absl::Hours(1);  // registration only in these tests
    manager_ = std::make_unique<CampaignManager>(failing_.get(), registry_.get(), &connector_,
                                                 &clock_, &metrics_, options);
    registry_->SetOnChange([this] { manager_->Poke(); });
    subscription_ = manager_->Subscribe([this](const crest::v1::Campaign& c) {
      absl::MutexLock lock(&mu_);
      latest_[c.id()] = c;
      ++changes_;
    });
  }

  void CloseManager() {
    if (manager_ == nullptr) return;
    manager_->Shutdown();
    manager_->Unsubscribe(subscription_);
    manager_.reset();
    registry_.reset();
    failing_.reset();
    store_.reset();
  }

  // An agent labelled model=`model`, running `slots` daemon slots (0: an agent without slots).
  std::shared_ptr<FakeAgent> AddAgent(const std::string& name, const std::string& model = "m",
                                      uint32_t slots = 0) {
    auto agent = connector_.agent(name) ? connector_.agent(name) : connector_.Add(name);
    crest::v1::RegisterAgentRequest r;
    r.set_node_name(name);
    r.set_slots(slots);
    r.set_advertise_address("127.0.0.1:1");
    (*r.mutable_labels())["model"] = model;
    EXPECT_TRUE(registry_->Register(r).ok());
    return agent;
  }

  // These tests exercise scheduling, retries and resume over the practice's
  // ladder, whose points are easy to follow: a spec without a strategy runs
  // `practice` here (search_knee_test.cc tests the default).
  crest::v1::CampaignSpec Spec(const std::string& yaml) {
    ParsedSpec parsed = ParseAndValidateCampaignSpec(yaml);
    EXPECT_TRUE(parsed.problems.empty()) << FormatProblems(parsed.problems);
    if (yaml.find("strategy") == std::string::npos) {
      parsed.spec.mutable_search()->set_strategy("practice");
    }
    return parsed.spec;
  }

  // Waits (on change notifications, with a deadline) until `pred` holds.
  bool WaitFor(const std::string& id, const std::function<bool(const crest::v1::Campaign&)>& pred) {
    absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      auto c = manager_->Get(id);
      if (c.ok() && pred(*c)) return true;
      absl::MutexLock lock(&mu_);
      int seen = changes_;
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return changes_ != seen; };
      mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(100));
    }
    return false;
  }

  bool WaitForState(const std::string& id, crest::v1::CampaignState state) {
    return WaitFor(id, [state](const crest::v1::Campaign& c) { return c.state() == state; });
  }

  static bool WaitHeld(const FakeAgent& agent, int n) { return agent.AwaitHeld(n, kWait); }

  std::vector<crest::v1::Trial> Trials(const std::string& id, const std::string& model = "m") {
    auto r = manager_->Report(id);
    EXPECT_TRUE(r.ok());
    for (const auto& m : r->models()) {
      if (m.model() == model) return {m.trials().begin(), m.trials().end()};
    }
    return {};
  }

  static std::vector<std::string> Summary(const std::vector<crest::v1::Trial>& trials) {
    std::vector<std::string> out;
    out.reserve(trials.size());
    for (const auto& t : trials) {
      out.push_back(absl::StrCat(t.parameters().max_batch_size(), ":",
                                 crest::v1::TrialStatus_Name(t.status()), "@", t.node()));
    }
    return out;
  }

  ::crest::testing::TempDir dir_;
  ::crest::testing::FakeClock clock_;
  FakeConnector connector_;
  Metrics metrics_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<FailingStore> failing_;
  TimeScales time_scales_;  // the registry's, read by OpenManager
  std::unique_ptr<AgentRegistry> registry_;
  std::unique_ptr<CampaignManager> manager_;
  int subscription_ = -1;
  absl::Mutex mu_;
  std::map<std::string, crest::v1::Campaign> latest_ ABSL_GUARDED_BY(mu_);
  int changes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace crest::controller::testing
