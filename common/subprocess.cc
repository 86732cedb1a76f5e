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
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("spawn: empty argv");
  }
  std::string program = options.argv[0];
  if (options.search_path) {
    program = FindOnPath(program);
    if (program.empty()) {
      return absl::NotFoundError(absl::StrCat(options.argv[0], ": not found on PATH"));
    }
  }
  // Everything the child needs is built before fork: after fork only
  // async-signal-safe calls are allowed in a multi-threaded parent.
  std::vector<char*> argv;
  argv.reserve(options.argv.size() + 1);
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

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
  std::vector<std::string> env_strings;
  env_strings.reserve(env_map.size());
  for (const auto& [k, v] : env_map) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  cpu_set_t cpu_set;
  CPU_ZERO(&cpu_set);
  for (uint32_t cpu : options.cpus) {
    if (cpu >= CPU_SETSIZE)
      return absl::InvalidArgumentError(absl::StrCat("CPU ", cpu, " too large"));
    CPU_SET(cpu, &cpu_set);
  }

  int out_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  int err_pipe[2] = {-1, -1};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(err)));
  }
  // The child waits on this pipe before exec until before_exec succeeded.
  int go_pipe[2] = {-1, -1};
  if (options.before_exec && ::pipe2(go_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(err)));
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    for (int fd :
         {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], go_pipe[0], go_pipe[1], devnull}) {
      if (fd >= 0) ::close(fd);
    }
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    // Child. Undo what the parent set up for itself: blocked signals (the
    // agent blocks SIGTERM for sigwait) and ignored ones.
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    if (::setpgid(0, 0) != 0) ChildFail(err_pipe[1], kStagePgid);
    if (options.parent_death_signal != 0) {
      if (::prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) {
        ChildFail(err_pipe[1], kStageParentDeath);
      }
      // The parent may have died before the signal was armed.
      if (::getppid() != parent) ::_exit(127);
    }
    if (go_pipe[0] >= 0) {
      ::close(go_pipe[1]);
      char go = 0;
      ssize_t r = 0;
      do {
        r = ::read(go_pipe[0], &go, 1);
      } while (r < 0 && errno == EINTR);
      // End of file: the parent refused the start or died; never exec.
      if (r != 1) ::_exit(127);
      ::close(go_pipe[0]);
    }
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) {
      ChildFail(err_pipe[1], kStageChdir);
    }
    if (!options.cpus.empty() && ::sched_setaffinity(0, sizeof(cpu_set), &cpu_set) != 0) {
      ChildFail(err_pipe[1], kStageAffinity);
    }
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    int out = options.capture_output ? out_pipe[1] : devnull;
    if (out >= 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
    }
    // No descriptor of the parent (sockets, state files) leaks into the child.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(program.c_str(), argv.data(), envp.data());
    ChildFail(err_pipe[1], kStageExec);
  }
  // Parent. Also set the group here, so it exists before we ever signal it.
  ::setpgid(pid, pid);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (devnull >= 0) ::close(devnull);
  if (go_pipe[0] >= 0) {
    ::close(go_pipe[0]);
    absl::Status ready = options.before_exec(pid);
    if (ready.ok()) WriteAll(go_pipe[1], "g", 1);
    ::close(go_pipe[1]);
    if (!ready.ok()) {
      ::kill(pid, SIGKILL);
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      ::close(err_pipe[0]);
      ::close(out_pipe[0]);
      return ready;
    }
  }
  ChildError child_error{0, 0};
  ssize_t n = 0;
  do {
    n = ::read(err_pipe[0], &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_error))) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(out_pipe[0]);
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
  int flags = ::fcntl(out_pipe[0], F_GETFL);
  ::fcntl(out_pipe[0], F_SETFL, flags | O_NONBLOCK);
  // glibc 2.36 declares pidfd_open without C linkage for C++; use the syscall.
  int pid_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (!options.capture_output) {
    ::close(out_pipe[0]);
    out_pipe[0] = -1;
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, out_pipe[0], pid_fd));
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
