#include "controller/cancel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"

namespace crest::controller {
namespace {

TEST(CancelSignalTest, RunsEachSubscriberOnceAndLateSubscribersAtOnce) {
  CancelSignal signal;
  int a = 0;
  int b = 0;
  signal.Subscribe([&] { ++a; });
  int id = signal.Subscribe([&] { ++b; });
  signal.Unsubscribe(id);
  signal.Cancel();
  signal.Cancel();
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 0);
  EXPECT_TRUE(signal.cancelled());
  int late = 0;
  EXPECT_EQ(signal.Subscribe([&] { ++late; }), -1);
  EXPECT_EQ(late, 1);
}

// The CI crash of 2026-12-03: Cancel() ran a callback that called TryCancel on
// a grpc::ClientContext whose scope had already ended. Unsubscribe must not
// return while its callback runs.
TEST(CancelSignalTest, UnsubscribeWaitsForItsRunningCallback) {
  CancelSignal signal;
  absl::Notification started;
  absl::Notification release;
  std::atomic<bool> finished{false};
  std::atomic<bool> finished_when_unsubscribed{false};
  const int id = signal.Subscribe([&] {
    started.Notify();
    release.WaitForNotification();
    finished = true;
  });
  std::thread canceller([&] { signal.Cancel(); });
  started.WaitForNotification();
  std::thread subscriber([&] {
    signal.Unsubscribe(id);
    finished_when_unsubscribed = finished.load();
  });
  release.Notify();
  subscriber.join();
  canceller.join();
  EXPECT_TRUE(finished_when_unsubscribed);
}

TEST(CancelSignalTest, ScopedCallbackThatEndedIsNotRun) {
  CancelSignal signal;
  int runs = 0;
  {
    ScopedCancelCallback scoped(&signal, [&] { ++runs; });
  }
  signal.Cancel();
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace crest::controller
