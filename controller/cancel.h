// A one-shot cancellation signal shared between the scheduler and the
// threads running a trial: Cancel() runs every subscribed callback (e.g.
// grpc::ClientContext::TryCancel) once, and later subscribers immediately.
#pragma once

#include <functional>
#include <map>

#include "absl/synchronization/mutex.h"

namespace crest::controller {

class CancelSignal {
 public:
  // Callbacks run on the cancelling thread, one at a time and outside the
  // lock, so a callback may itself take locks of its own.
  void Cancel() {
    mu_.Lock();
    if (cancelled_) {
      mu_.Unlock();
      return;
    }
    cancelled_ = true;
    while (!callbacks_.empty()) {
      auto it = callbacks_.begin();
      running_ = it->first;
      std::function<void()> cb = std::move(it->second);
      callbacks_.erase(it);
      mu_.Unlock();
      cb();
      mu_.Lock();
      running_ = -1;
    }
    mu_.Unlock();
  }
  bool cancelled() const {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  // Returns an id for Unsubscribe; runs `cb` now when cancelled already.
  int Subscribe(std::function<void()> cb) {
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        callbacks_[next_id_] = std::move(cb);
        return next_id_++;
      }
    }
    cb();
    return -1;
  }
  // After Unsubscribe returns the callback neither runs nor is running: a
  // callback refers to its subscriber's state (a grpc::ClientContext on the
  // stack), which is destroyed right after.
  void Unsubscribe(int id) {
    absl::MutexLock lock(&mu_);
    callbacks_.erase(id);
    auto not_running = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ != id; };
    mu_.Await(absl::Condition(&not_running));
  }

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = -1;  // the id of the callback Cancel() runs now
  std::map<int, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

// Subscribes for the lifetime of the scope.
class ScopedCancelCallback {
 public:
  ScopedCancelCallback(CancelSignal* signal, std::function<void()> cb) : signal_(signal) {
    if (signal_ != nullptr) id_ = signal_->Subscribe(std::move(cb));
  }
  ~ScopedCancelCallback() {
    if (signal_ != nullptr && id_ >= 0) signal_->Unsubscribe(id_);
  }
  ScopedCancelCallback(const ScopedCancelCallback&) = delete;
  ScopedCancelCallback& operator=(const ScopedCancelCallback&) = delete;

 private:
  CancelSignal* signal_;
  int id_ = -1;
};

}  // namespace crest::controller
