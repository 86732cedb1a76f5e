#include "tests/e2e/e2e_harness.h"

#include <dirent.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace crest::e2e {

absl::StatusOr<std::unique_ptr<Process>> Process::Start(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        const std::string& name) {
  std::vector<std::string> argv = {binary.front() == '/' ? binary : BinDir() + "/" + binary};
  argv.insert(argv.end(), args.begin(), args.end());
  return StartCommand(std::move(argv), name);
}

absl::StatusOr<std::unique_ptr<Process>> Process::StartCommand(
    std::vector<std::string> argv, const std::string& name,
    const std::map<std::string, std::string>& env) {
  SpawnOptions options;
  options.argv = std::move(argv);
  options.env = env;
  auto proc = Subprocess::Spawn(options);
  if (!proc.ok()) return proc.status();
  std::unique_ptr<Process> p(new Process());
  p->name_ = name;
  p->proc_ = std::move(*proc);
  p->reader_ = std::thread([raw = p.get()] { raw->Drain(); });
  return p;
}

Process::~Process() {
  Kill();
  proc_->WaitFor(absl::Seconds(10));
  if (reader_.joinable()) reader_.join();
}

void Process::Drain() {
  while (true) {
    pollfd pfd{proc_->output_fd(), POLLIN, 0};
    poll(&pfd, 1, 200);
    std::string chunk;
    bool open = proc_->ReadAvailable(&chunk);
    absl::MutexLock lock(&mu_);
    out_ += chunk;
    if (!open) {
      eof_ = true;
      return;
    }
  }
}

absl::StatusOr<std::string> Process::WaitForLine(const std::string& needle,
                                                 absl::Duration timeout) {
  return WaitForAnyLine({needle}, timeout);
}

absl::StatusOr<std::string> Process::WaitForAnyLine(const std::vector<std::string>& needles,
                                                    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto first = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t pos = std::string::npos;
    for (const std::string& n : needles) pos = std::min(pos, out_.find(n));
    return pos;
  };
  auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return first() != std::string::npos || eof_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&found), timeout);
  size_t pos = first();
  if (pos == std::string::npos) {
    return absl::DeadlineExceededError(
        absl::StrCat(name_, ": no line with '", absl::StrJoin(needles, "' or '"), "' within ",
                     absl::FormatDuration(timeout), eof_ ? " (it exited)" : "", "; output:\n",
                     out_.substr(out_.size() > 4000 ? out_.size() - 4000 : 0)));
  }
  auto begin = out_.rfind('\n', pos);
  auto end = out_.find('\n', pos);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return out_.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

absl::StatusOr<int> Process::WaitForNumberAfter(const std::string& prefix, absl::Duration timeout) {
  auto line = WaitForLine(prefix, timeout);
  if (!line.ok()) return line.status();
  std::string rest = line->substr(line->find(prefix) + prefix.size());
  size_t n = 0;
  while (n < rest.size() && isdigit(static_cast<unsigned char>(rest[n])) != 0) ++n;
  int v = 0;
  if (!absl::SimpleAtoi(rest.substr(0, n), &v)) {
    return absl::InternalError(absl::StrCat("no number after '", prefix, "' in: ", *line));
  }
  return v;
}

std::string Process::output() const {
  absl::MutexLock lock(&mu_);
  return out_;
}

void Process::Kill() { proc_->SignalGroup(SIGKILL).IgnoreError(); }

std::optional<ExitInfo> Process::Terminate(absl::Duration timeout) {
  kill(proc_->pid(), SIGTERM);
  return proc_->WaitFor(timeout);
}

std::optional<ExitInfo> Process::Wait(absl::Duration timeout) { return proc_->WaitFor(timeout); }

CommandResult RunBinary(const std::string& binary, const std::vector<std::string>& args,
                        absl::Duration timeout) {
  std::vector<std::string> argv = {binary.front() == '/' ? binary : BinDir() + "/" + binary};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunArgv(std::move(argv), timeout);
}

CommandResult RunArgv(std::vector<std::string> argv, absl::Duration timeout) {
  SpawnOptions options;
  options.argv = std::move(argv);
  CommandResult r;
  auto out = RunCommand(options, timeout);
  if (!out.ok()) {
    r.output = out.status().ToString();
    return r;
  }
  r.code = out->exit.code;
  r.output = out->output;
  return r;
}

void BecomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

int KillAllChildren() {
  int killed = 0;
  pid_t self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    // Fields after "(comm)": state ppid ...
    char state = 0;
    int ppid = 0;
    if (sscanf(text.c_str() + close_paren + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid != self) continue;
    ++killed;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  closedir(proc);
  return killed;
}

}  // namespace crest::e2e
