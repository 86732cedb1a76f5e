// A server stream fed by a worker thread, for gRPC callback services whose
// streaming work blocks (a daemon start, a benchmark): events queue up, one
// write is in flight, and Finish comes once the worker is done and the queue
// drained. `coalesce` says whether a new event may replace the last unsent
// one (progress snapshots). Cancelling the call sets cancelled().
#pragma once

#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace crest {

template <typename Event>
class StreamReactor : public grpc::ServerWriteReactor<Event> {
 public:
  using Coalesce = std::function<bool(const Event& queued, const Event& next)>;
  explicit StreamReactor(Coalesce coalesce) : coalesce_(std::move(coalesce)) {}

  // Starts `work` on its own thread; it calls Push and returns the status.
  void Start(std::function<grpc::Status(StreamReactor*)> work) {
    thread_ = std::thread([this, work = std::move(work)] {
      grpc::Status status = work(this);
      WorkDone(status);
    });
  }
  void FinishNow(const grpc::Status& status) { this->Finish(status); }

  void Push(const Event& event) {
    absl::MutexLock lock(&mu_);
    if (broken_) return;
    if (!queue_.empty() && coalesce_ && coalesce_(queue_.back(), event)) {
      queue_.back() = event;
    } else {
      queue_.push_back(event);
    }
    MaybeWriteLocked();
  }
  const std::atomic<bool>* cancelled() const { return &cancelled_; }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      broken_ = true;
      cancelled_ = true;
      queue_.clear();
    }
    MaybeWriteLocked();
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override {
    if (thread_.joinable()) {
      // OnDone may run inline on the worker thread itself, right after Finish.
      if (thread_.get_id() == std::this_thread::get_id()) {
        thread_.detach();
      } else {
        thread_.join();
      }
    }
    delete this;
  }

 private:
  void WorkDone(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    status_ = status;
    work_done_ = true;
    MaybeWriteLocked();
  }
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty()) {
      writing_ = true;
      this->StartWrite(&queue_.front());
      return;
    }
    if (work_done_) {
      finished_ = true;
      this->Finish(status_);
    }
  }

  Coalesce coalesce_;
  std::thread thread_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool work_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest
