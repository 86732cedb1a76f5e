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
  void Cancel() {
    std::map<int, std::function<void()>> callbacks;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
      cancelled_ = true;
      callbacks.swap(callbacks_);
    }
    for (auto& [id, cb] : callbacks) cb();
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
  void Unsubscribe(int id) {
    absl::MutexLock lock(&mu_);
    callbacks_.erase(id);
  }

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
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
