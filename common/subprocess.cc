#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "common/status.h"

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX name.

namespace crest {
namespace {

// What the child reports through the error pipe when a step before exec fails.
struct ChildError {
  int stage;
  int err;
};
enum Stage : int {
  kStageChdir = 1,
  kStageAffinity = 2,
  kStageExec = 3,
  kStagePgid = 4,
  kStageParentDeath = 5,
};

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

[[noreturn]] void ChildFail(int fd, int stage) {
  ChildError e{stage, errno};
  WriteAll(fd, &e, sizeof(e));
  ::_exit(127);
}

ExitInfo FromWaitStatus(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signaled = true;
    info.signal = WTERMSIG(status);
    info.code = 128 + info.signal;
  }
  return info;
}

// Everything the child needs, built before fork: after fork only
// async-signal-safe calls are allowed in a multi-threaded parent.
struct ChildPlan {
  std::string program;
  std::vector<char*> argv;       // into SpawnOptions::argv
  std::vector<std::string> env;  // "NAME=value"
  std::vector<char*> envp;       // into env
  cpu_set_t cpus;
  pid_t parent = 0;
};

absl::Status PlanChild(const SpawnOptions& options, ChildPlan& plan) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("spawn: empty argv");
  }
  plan.program = options.argv[0];
  if (options.search_path) {
    plan.program = FindOnPath(plan.program);
    if (plan.program.empty()) {
      return absl::NotFoundError(absl::StrCat(options.argv[0], ": not found on PATH"));
    }
  }
  plan.argv.reserve(options.argv.size() + 1);
  for (const std::string& a : options.argv) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);

  std::map<std::string, std::string> env_map;
  if (options.inherit_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      absl::string_view entry(*e);
      size_t eq = entry.find('=');
      if (eq == absl::string_view::npos) continue;
      env_map[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
    }
  }
  for (const auto& [k, v] : options.env) env_map[k] = v;
  plan.env.reserve(env_map.size());
  for (const auto& [k, v] : env_map) plan.env.push_back(absl::StrCat(k, "=", v));
  plan.envp.reserve(plan.env.size() + 1);
  for (std::string& s : plan.env) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);

  CPU_ZERO(&plan.cpus);
  for (uint32_t cpu : options.cpus) {
    if (cpu >= CPU_SETSIZE)
      return absl::InvalidArgumentError(absl::StrCat("CPU ", cpu, " too large"));
    CPU_SET(cpu, &plan.cpus);
  }
  plan.parent = ::getpid();
  return absl::OkStatus();
}

// The descriptors between parent and child; -1 where there is none.
struct ChildPipes {
  int out[2] = {-1, -1};  // the child's stdout and stderr
  int err[2] = {-1, -1};  // a ChildError when a step before exec fails
  int go[2] = {-1, -1};   // the child waits on it before exec until before_exec succeeded
  int devnull = -1;
};

void CloseAll(const ChildPipes& pipes) {
  for (int fd : {pipes.out[0], pipes.out[1], pipes.err[0], pipes.err[1], pipes.go[0], pipes.go[1],
                 pipes.devnull}) {
    if (fd >= 0) ::close(fd);
  }
}

absl::Status OpenPipes(bool with_go, ChildPipes& pipes) {
  if (::pipe2(pipes.out, O_CLOEXEC) != 0 || ::pipe2(pipes.err, O_CLOEXEC) != 0 ||
      (with_go && ::pipe2(pipes.go, O_CLOEXEC) != 0)) {
    int err = errno;
    CloseAll(pipes);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(err)));
  }
  pipes.devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  return absl::OkStatus();
}

// The child, from fork to exec: async-signal-safe calls only.
[[noreturn]] void RunChild(const SpawnOptions& options, const ChildPlan& plan,
                           const ChildPipes& pipes) {
  // Undo what the parent set up for itself: blocked signals (the agent
  // blocks SIGTERM for sigwait) and ignored ones.
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  if (::setpgid(0, 0) != 0) ChildFail(pipes.err[1], kStagePgid);
  if (options.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) {
      ChildFail(pipes.err[1], kStageParentDeath);
    }
    // The parent may have died before the signal was armed.
    if (::getppid() != plan.parent) ::_exit(127);
  }
  if (pipes.go[0] >= 0) {
    ::close(pipes.go[1]);
    char go = 0;
    ssize_t r = 0;
    do {
      r = ::read(pipes.go[0], &go, 1);
    } while (r < 0 && errno == EINTR);
    // End of file: the parent refused the start or died; never exec.
    if (r != 1) ::_exit(127);
    ::close(pipes.go[0]);
  }
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) {
    ChildFail(pipes.err[1], kStageChdir);
  }
  if (!options.cpus.empty() && ::sched_setaffinity(0, sizeof(plan.cpus), &plan.cpus) != 0) {
    ChildFail(pipes.err[1], kStageAffinity);
  }
  if (pipes.devnull >= 0) ::dup2(pipes.devnull, STDIN_FILENO);
  int out = options.capture_output ? pipes.out[1] : pipes.devnull;
  if (out >= 0) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
  }
  // No descriptor of the parent (sockets, state files) leaks into the child.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(plan.program.c_str(), plan.argv.data(), plan.envp.data());
  ChildFail(pipes.err[1], kStageExec);
}

// The parent's side before the exec: the child execs only once before_exec
// (the agent's durable pid record) succeeded; otherwise it is killed.
absl::Status LetChildExec(pid_t pid, const SpawnOptions& options, const ChildPipes& pipes) {
  ::close(pipes.out[1]);
  ::close(pipes.err[1]);
  if (pipes.devnull >= 0) ::close(pipes.devnull);
  if (pipes.go[0] < 0) return absl::OkStatus();
  ::close(pipes.go[0]);
  absl::Status ready = options.before_exec(pid);
  if (ready.ok()) WriteAll(pipes.go[1], "g", 1);
  ::close(pipes.go[1]);
  if (!ready.ok()) {
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(pipes.err[0]);
    ::close(pipes.out[0]);
  }
  return ready;
}

// What the child reported before its exec failed (it is reaped then);
// nothing when the exec closed the error pipe.
std::optional<ChildError> ReadChildError(pid_t pid, const ChildPipes& pipes) {
  ChildError child_error{0, 0};
  ssize_t n = 0;
  do {
    n = ::read(pipes.err[0], &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  ::close(pipes.err[0]);
  if (n != static_cast<ssize_t>(sizeof(child_error))) return std::nullopt;
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(pipes.out[0]);
  return child_error;
}

absl::Status ChildErrorStatus(const ChildError& child_error, const SpawnOptions& options,
                              const std::string& program) {
  std::string why = std::strerror(child_error.err);
  switch (child_error.stage) {
    case kStageChdir:
      return absl::FailedPreconditionError(
          absl::StrCat("changing to directory ", options.cwd, ": ", why));
    case kStageAffinity: {
      std::vector<std::string> ids;
      ids.reserve(options.cpus.size());
      for (uint32_t c : options.cpus) ids.push_back(absl::StrCat(c));
      return absl::FailedPreconditionError(
          absl::StrCat("setting CPU affinity to {", absl::StrJoin(ids, ","), "}: ", why));
    }
    case kStagePgid:
      return absl::InternalError(absl::StrCat("setpgid: ", why));
    case kStageParentDeath:
      return absl::InternalError(absl::StrCat("prctl(PR_SET_PDEATHSIG): ", why));
    default:
      if (child_error.err == ENOENT) {
        return absl::NotFoundError(absl::StrCat("executing ", program, ": ", why));
      }
      if (child_error.err == EACCES) {
        return absl::PermissionDeniedError(absl::StrCat("executing ", program, ": ", why));
      }
      return absl::FailedPreconditionError(absl::StrCat("executing ", program, ": ", why));
  }
}

}  // namespace

std::string FindOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Spawn(const SpawnOptions& options) {
  ChildPlan plan;
  CREST_RETURN_IF_ERROR(PlanChild(options, plan));
  ChildPipes pipes;
  CREST_RETURN_IF_ERROR(OpenPipes(static_cast<bool>(options.before_exec), pipes));
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    CloseAll(pipes);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) RunChild(options, plan, pipes);
  // Also set the group here, so it exists before we ever signal it.
  ::setpgid(pid, pid);
  CREST_RETURN_IF_ERROR(LetChildExec(pid, options, pipes));
  if (std::optional<ChildError> failed = ReadChildError(pid, pipes)) {
    return ChildErrorStatus(*failed, options, plan.program);
  }
  int output_fd = pipes.out[0];
  int flags = ::fcntl(output_fd, F_GETFL);
  ::fcntl(output_fd, F_SETFL, flags | O_NONBLOCK);
  // glibc 2.36 declares pidfd_open without C linkage for C++; use the syscall.
  int pid_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (!options.capture_output) {
    ::close(output_fd);
    output_fd = -1;
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, output_fd, pid_fd));
}

Subprocess::~Subprocess() {
  if (!exit_) {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  } else {
    // The leader is gone; make sure nothing it left in its group survives.
    ::kill(-pid_, SIGKILL);
  }
  if (output_fd_ >= 0) ::close(output_fd_);
  if (pid_fd_ >= 0) ::close(pid_fd_);
}

absl::Status Subprocess::SignalGroup(int sig) {
  if (::kill(-pid_, sig) != 0) {
    if (errno == ESRCH)
      return absl::NotFoundError(absl::StrCat("process group ", pid_, " is gone"));
    return absl::InternalError(absl::StrCat("kill(-", pid_, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::optional<ExitInfo> Subprocess::TryReap() {
  if (exit_) return exit_;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_ = FromWaitStatus(status);
  return exit_;
}

std::optional<ExitInfo> Subprocess::WaitFor(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (auto info = TryReap()) return info;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return std::nullopt;
    int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    if (pid_fd_ >= 0) {
      pollfd p{pid_fd_, POLLIN, 0};
      ::poll(&p, 1, ms);
    } else {
      ::usleep(static_cast<useconds_t>(std::min(ms, 10) * 1000));
    }
  }
}

bool Subprocess::ReadAvailable(std::string* out) {
  if (output_fd_ < 0) return false;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(output_fd_, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return true;  // EAGAIN: nothing more for now.
  }
}

SpawnThread::SpawnThread() : thread_([this] { Loop(); }) {}

SpawnThread::~SpawnThread() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  thread_.join();
}

void SpawnThread::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](SpawnThread* t)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->quit_ || t->request_ != nullptr; },
        this));
    if (quit_) return;
    const SpawnOptions* request = request_;
    request_ = nullptr;
    mu_.Unlock();
    auto result = Subprocess::Spawn(*request);
    mu_.Lock();
    reply_ = std::move(result);
  }
}

absl::StatusOr<std::unique_ptr<Subprocess>> SpawnThread::Spawn(const SpawnOptions& options) {
  absl::MutexLock call(&call_mu_);
  absl::MutexLock lock(&mu_);
  request_ = &options;
  mu_.Await(absl::Condition(
      +[](SpawnThread* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->reply_.has_value(); },
      this));
  absl::StatusOr<std::unique_ptr<Subprocess>> result = std::move(*reply_);
  reply_.reset();
  return result;
}

bool ProcessGroupExists(pid_t pgid) { return ::kill(-pgid, 0) == 0 || errno == EPERM; }

absl::StatusOr<CommandOutput> RunCommand(const SpawnOptions& options, absl::Duration timeout) {
  SpawnOptions opts = options;
  opts.capture_output = true;
  auto child = Subprocess::Spawn(opts);
  if (!child.ok()) return child.status();
  CommandOutput result;
  absl::Time deadline = absl::Now() + timeout;
  bool open = true;
  while (open) {
    open = (*child)->ReadAvailable(&result.output);
    if (!open) break;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.argv[0], " did not finish within ", absl::FormatDuration(timeout)));
    }
    pollfd p{(*child)->output_fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
  }
  auto info = (*child)->WaitFor(deadline - absl::Now());
  if (!info) {
    return absl::DeadlineExceededError(
        absl::StrCat(options.argv[0], " did not exit within ", absl::FormatDuration(timeout)));
  }
  result.exit = *info;
  return result;
}

}  // namespace crest
