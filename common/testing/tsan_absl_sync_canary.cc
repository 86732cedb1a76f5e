// TSan builds only: proves that tsan_absl_sync.cc shows ThreadSanitizer the
// synchronisation of absl::Mutex and kin, and hides nothing else.
//   tsan_absl_sync_canary synchronised  -> no report (exit 0)
//   tsan_absl_sync_canary racy          -> a data race reported (exit 66)
// (common/CMakeLists.txt runs both as tests.)
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

// Plain ints on purpose: only the mutex orders their accesses.
struct Shared {
  absl::Mutex mu;
  absl::CondVar cv;
  int counter = 0;
  int payload = 0;
  bool ready = false;
};

void Locked(Shared& s) {
  auto add = [&s] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&s.mu);
      ++s.counter;
    }
  };
  std::thread a(add);
  std::thread b(add);
  a.join();
  b.join();
}

// The payload is written before `ready` is set under the lock, and read
// after Await returns: the Condition is evaluated inside the library.
void Await(Shared& s) {
  std::thread producer([&s] {
    s.payload = 42;
    absl::MutexLock lock(&s.mu);
    s.ready = true;
  });
  {
    absl::MutexLock lock(&s.mu);
    s.mu.Await(absl::Condition(&s.ready));
  }
  std::printf("await: %d\n", s.payload);
  producer.join();
}

void CondVarWait(Shared& s) {
  s.ready = false;
  std::thread producer([&s] {
    s.payload = 7;
    absl::MutexLock lock(&s.mu);
    s.ready = true;
    s.cv.Signal();
  });
  {
    absl::MutexLock lock(&s.mu);
    while (!s.ready) s.cv.Wait(&s.mu);
  }
  std::printf("condvar: %d\n", s.payload);
  producer.join();
}

void NotificationWait(Shared& s) {
  absl::Notification done;
  std::thread producer([&] {
    s.payload = 9;
    done.Notify();
  });
  done.WaitForNotification();
  std::printf("notification: %d\n", s.payload);
  producer.join();
}

// One side takes the lock, the other does not: a race TSan must see.
void Racy(Shared& s) {
  std::thread writer([&s] {
    absl::MutexLock lock(&s.mu);
    ++s.counter;
  });
  ++s.counter;
  writer.join();
}

}  // namespace

int main(int argc, char** argv) {
  Shared s;
  if (argc == 2 && std::strcmp(argv[1], "synchronised") == 0) {
    Locked(s);
    Await(s);
    CondVarWait(s);
    NotificationWait(s);
    std::printf("counter: %d\n", s.counter);
    return s.counter == 2000 ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "racy") == 0) {
    Racy(s);
    return 0;
  }
  std::fprintf(stderr, "usage: %s synchronised|racy\n", argv[0]);
  return 2;
}
