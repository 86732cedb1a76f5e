// ThreadSanitizer builds only (CREST_TSAN_ABSL_SYNC): tells TSan about the
// synchronisation of Debian's absl::Mutex, CondVar, Notification,
// BlockingCounter and Barrier.
//
// Debian's abseil is not built with -fsanitize=thread, so its Mutex takes and
// releases its lock with atomics and futexes TSan never sees: every access
// guarded by an absl::Mutex looks like a race (43,822 reports over the unit
// and integration tests). Building abseil from source is ruled out (Debian
// packages only), so this file defines the same member functions in the
// executable, which the dynamic linker prefers over the library's for every
// caller (our code, gRPC, abseil itself through its PLT). Each forwards to
// the library's own function (dlsym RTLD_NEXT) and adds the acquire or
// release it implies through TSan's public mutex annotations
// (sanitizer/tsan_interface.h), the same ones an instrumented abseil makes.
//
// The tsan preset also compiles with -U__SANITIZE_THREAD__: protobuf's and
// abseil's headers change class layouts under that macro (MapFieldBase gains
// two counters), which would no longer match Debian's uninstrumented
// libraries (a crash parsing any map field). The instrumentation itself does
// not depend on the macro.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

// The library's definition of the function whose mangled name is `name`.
template <typename Fn>
Fn Real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in the abseil library: %s\n", name,
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

// The mangled names carry Debian's inline namespace (absl::debian3).
#define CREST_ABSL_NS "N4absl7debian3"

// The library's functions call each other through its PLT, so they reach
// these definitions too (CondVar::WaitWithTimeout calls WaitWithDeadline):
// only the outermost call on a thread tells TSan.
thread_local int depth = 0;
class Outer {
 public:
  Outer() : outer_(depth++ == 0) {}
  ~Outer() { --depth; }
  Outer(const Outer&) = delete;
  Outer& operator=(const Outer&) = delete;
  explicit operator bool() const { return outer_; }

 private:
  bool outer_;
};

void Locked(const Outer& outer, void* mu, unsigned flags) {
  if (!outer) return;
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
}
void Unlocking(const Outer& outer, void* mu, unsigned flags) {
  if (!outer) return;
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}
// Conditions (LockWhen, Await) are evaluated by the library with the lock
// held, by the waiting thread or by the one unlocking, while TSan (told at
// the outermost call) sees no lock held then: Condition::Eval takes and
// gives back the lock in TSan's eyes, the one this thread's outermost call
// on a mutex concerns.
thread_local const void* eval_mutex = nullptr;
class EvalUnder {
 public:
  explicit EvalUnder(const void* mu) : saved_(eval_mutex) {
    if (saved_ == nullptr) eval_mutex = mu;
  }
  ~EvalUnder() { eval_mutex = saved_; }
  EvalUnder(const EvalUnder&) = delete;
  EvalUnder& operator=(const EvalUnder&) = delete;

 private:
  const void* saved_;
};

void Release(const Outer& outer, const void* addr) {
  if (outer) __tsan_release(const_cast<void*>(addr));
}
void Acquire(const Outer& outer, const void* addr) {
  if (outer) __tsan_acquire(const_cast<void*>(addr));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ~Mutex is left alone: gRPC destroys its objects on whichever thread drops
// the last reference, after an atomic count TSan cannot see (uninstrumented),
// and a destroy annotation would report each as a race with the last lock.

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" CREST_ABSL_NS "5Mutex4LockEv");
  const Outer outer;
  const EvalUnder eval(this);
  real(this);
  Locked(outer, this, 0);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" CREST_ABSL_NS "5Mutex6UnlockEv");
  const Outer outer;
  const EvalUnder eval(this);
  Unlocking(outer, this, 0);
  real(this);
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" CREST_ABSL_NS "5Mutex10ReaderLockEv");
  const Outer outer;
  const EvalUnder eval(this);
  real(this);
  Locked(outer, this, __tsan_mutex_read_lock);
}

void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("_Z" CREST_ABSL_NS "5Mutex12ReaderUnlockEv");
  const Outer outer;
  const EvalUnder eval(this);
  Unlocking(outer, this, __tsan_mutex_read_lock);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("_Z" CREST_ABSL_NS "5Mutex7TryLockEv");
  const Outer outer;
  const EvalUnder eval(this);
  const bool got = real(this);
  if (got) Locked(outer, this, __tsan_mutex_try_lock);
  return got;
}

bool Mutex::ReaderTryLock() {
  static auto real = Real<bool (*)(Mutex*)>("_Z" CREST_ABSL_NS "5Mutex13ReaderTryLockEv");
  const Outer outer;
  const EvalUnder eval(this);
  const bool got = real(this);
  if (got) Locked(outer, this, __tsan_mutex_try_lock | __tsan_mutex_read_lock);
  return got;
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("_Z" CREST_ABSL_NS
                                                              "5Mutex8LockWhenERKNS0_9ConditionE");
  const Outer outer;
  const EvalUnder eval(this);
  real(this, cond);
  Locked(outer, this, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_Z" CREST_ABSL_NS "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  const Outer outer;
  const EvalUnder eval(this);
  real(this, cond);
  Locked(outer, this, __tsan_mutex_read_lock);
}

// The *When* calls with a time limit hold the lock on return whatever they
// answer.
bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "_Z" CREST_ABSL_NS "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outer outer;
  const EvalUnder eval(this);
  const bool met = real(this, cond, timeout);
  Locked(outer, this, 0);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "_Z" CREST_ABSL_NS "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outer outer;
  const EvalUnder eval(this);
  const bool met = real(this, cond, deadline);
  Locked(outer, this, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "_Z" CREST_ABSL_NS "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outer outer;
  const EvalUnder eval(this);
  const bool met = real(this, cond, timeout);
  Locked(outer, this, __tsan_mutex_read_lock);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "_Z" CREST_ABSL_NS "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outer outer;
  const EvalUnder eval(this);
  const bool met = real(this, cond, deadline);
  Locked(outer, this, __tsan_mutex_read_lock);
  return met;
}

// Await and CondVar::Wait release the held lock while they wait and take it
// again before they return. Readers' waits are modelled as writers': TSan
// only needs the release and the acquire.
void Mutex::Await(const Condition& cond) {
  static auto real =
      Real<void (*)(Mutex*, const Condition&)>("_Z" CREST_ABSL_NS "5Mutex5AwaitERKNS0_9ConditionE");
  const Outer outer;
  const EvalUnder eval(this);
  Unlocking(outer, this, 0);
  real(this, cond);
  Locked(outer, this, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "_Z" CREST_ABSL_NS "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outer outer;
  const EvalUnder eval(this);
  Unlocking(outer, this, 0);
  const bool met = real(this, cond, timeout);
  Locked(outer, this, 0);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "_Z" CREST_ABSL_NS "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outer outer;
  const EvalUnder eval(this);
  Unlocking(outer, this, 0);
  const bool met = real(this, cond, deadline);
  Locked(outer, this, 0);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static auto real =
      Real<void (*)(CondVar*, Mutex*)>("_Z" CREST_ABSL_NS "7CondVar4WaitEPNS0_5MutexE");
  const Outer outer;
  const EvalUnder eval(mu);
  Unlocking(outer, mu, 0);
  real(this, mu);
  Locked(outer, mu, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      "_Z" CREST_ABSL_NS "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  const Outer outer;
  const EvalUnder eval(mu);
  Unlocking(outer, mu, 0);
  const bool timed_out = real(this, mu, timeout);
  Locked(outer, mu, 0);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "_Z" CREST_ABSL_NS "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  const Outer outer;
  const EvalUnder eval(mu);
  Unlocking(outer, mu, 0);
  const bool timed_out = real(this, mu, deadline);
  Locked(outer, mu, 0);
  return timed_out;
}

bool Condition::Eval() const {
  static auto real = Real<bool (*)(const Condition*)>("_ZNK4absl7debian39Condition4EvalEv");
  const void* mu = eval_mutex;
  if (mu != nullptr) __tsan_acquire(const_cast<void*>(mu));
  const bool met = real(this);
  if (mu != nullptr) __tsan_release(const_cast<void*>(mu));
  return met;
}

// One-shot events: what happened before the signal happens before what
// follows the wait.
void Notification::Notify() {
  static auto real = Real<void (*)(Notification*)>("_Z" CREST_ABSL_NS "12Notification6NotifyEv");
  const Outer outer;
  Release(outer, this);
  real(this);
}

void Notification::WaitForNotification() const {
  static auto real =
      Real<void (*)(const Notification*)>("_ZNK4absl7debian312Notification19WaitForNotificationEv");
  const Outer outer;
  real(this);
  Acquire(outer, this);
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const Outer outer;
  const bool notified = real(this, timeout);
  if (notified) Acquire(outer, this);
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static auto real = Real<bool (*)(const Notification*, absl::Time)>(
      "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const Outer outer;
  const bool notified = real(this, deadline);
  if (notified) Acquire(outer, this);
  return notified;
}

bool BlockingCounter::DecrementCount() {
  static auto real =
      Real<bool (*)(BlockingCounter*)>("_Z" CREST_ABSL_NS "15BlockingCounter14DecrementCountEv");
  const Outer outer;
  Release(outer, this);
  return real(this);
}

void BlockingCounter::Wait() {
  static auto real =
      Real<void (*)(BlockingCounter*)>("_Z" CREST_ABSL_NS "15BlockingCounter4WaitEv");
  const Outer outer;
  real(this);
  Acquire(outer, this);
}

bool Barrier::Block() {
  static auto real = Real<bool (*)(Barrier*)>("_Z" CREST_ABSL_NS "7Barrier5BlockEv");
  const Outer outer;
  Release(outer, this);
  const bool last = real(this);
  Acquire(outer, this);
  return last;
}

ABSL_NAMESPACE_END
}  // namespace absl
