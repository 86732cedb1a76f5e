// DaemonSupervisor (daemon_supervisor.h) after the spawn: reading the
// daemon's output, noticing its exit (a crash after READY included), and
// stopping it (SIGTERM, grace, SIGKILL of the group, reap, config.json put
// back). Starting it is in daemon_supervisor.cc.
#include <poll.h>
#include <unistd.h>

#include <csignal>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

#include "agent/daemon_run.h"
#include "agent/daemon_supervisor.h"

namespace crest::agent {

using supervisor::kPollStep;
using supervisor::kReapWait;
using supervisor::kTailLines;

void DaemonSupervisor::OnLine(Run& run, const std::string& line) {
  run.log->Append(line);
  run.tail.push_back(line);
  if (run.tail.size() > kTailLines) run.tail.pop_front();
  if (run.stream_log) run.pending_lines.push_back(line);
  if (absl::StrContains(line, "Daemon start success!")) run.success_seen = true;
  run.startup.OnLine(line);
}

void DaemonSupervisor::Monitor(const std::shared_ptr<Run>& run) {
  std::string buffer;
  bool open = true;
  auto take_lines = [&](bool all) {
    absl::MutexLock lock(&mu_);
    size_t start = 0;
    for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n', start)) {
      std::string line = buffer.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      OnLine(*run, line);
      start = nl + 1;
    }
    buffer.erase(0, start);
    if (all && !buffer.empty()) {
      OnLine(*run, buffer);
      buffer.clear();
    }
  };
  while (true) {
    pollfd fds[2] = {{run->process->output_fd(), POLLIN, 0}, {run->process->pid_fd(), POLLIN, 0}};
    int nfds = open ? 2 : 1;
    pollfd* first = open ? fds : &fds[1];
    ::poll(first, nfds, static_cast<int>(absl::ToInt64Milliseconds(kPollStep)));
    if (open) {
      open = run->process->ReadAvailable(&buffer);
      take_lines(false);
    }
    std::optional<ExitInfo> exit = run->process->WaitFor(absl::ZeroDuration());
    if (!exit) continue;
    // The leader is gone: nothing of its group may outlive it.
    ::kill(-run->pid, SIGKILL);
    while (open) {
      pollfd p{run->process->output_fd(), POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) break;
      open = run->process->ReadAvailable(&buffer);
    }
    take_lines(true);
    bool crashed = false;
    {
      absl::MutexLock lock(&mu_);
      run->exit = exit;
      run->done = true;
      run->log->Append(absl::StrCat("=== crest-agent: daemon pid ", run->pid, " exited with code ",
                                    exit->code, " ==="));
      if (run_ == run && state_ == crest::v1::DAEMON_READY && !run->stopping) {
        crest::v1::DaemonFailed f =
            Fail(*run, crest::v1::DAEMON_FAILURE_EXITED,
                 absl::StrCat("daemon exited after it was ready (code ", exit->code, ")"));
        f.set_exit_code(exit->code);
        last_failure_ = f;
        crashed = true;
      }
    }
    if (crashed) {
      spdlog::error("daemon pid {} exited while ready (code {})", run->pid, exit->code);
      RemovePidRecord();
      Notify();
    }
    return;
  }
}

crest::v1::DaemonFailed DaemonSupervisor::Fail(Run& run, crest::v1::DaemonFailure kind,
                                               const std::string& reason) {
  crest::v1::DaemonFailed f;
  f.set_kind(kind);
  f.set_reason(reason);
  for (const std::string& line : run.tail) f.add_log_tail(line);
  f.set_exit_code(run.exit ? run.exit->code : -1);
  SetState(crest::v1::DAEMON_FAILED);
  last_failure_ = f;
  return f;
}
crest::v1::StopDaemonReply DaemonSupervisor::Stop(std::optional<absl::Duration> grace) {
  abort_start_ = true;
  absl::MutexLock op(&op_mu_);
  abort_start_ = false;
  crest::v1::StopDaemonReply reply = StopLocked(grace.value_or(config_.stop_grace));
  Notify();
  return reply;
}

crest::v1::StopDaemonReply DaemonSupervisor::StopLocked(absl::Duration grace) {
  crest::v1::StopDaemonReply reply;
  std::shared_ptr<Run> run;
  {
    absl::MutexLock lock(&mu_);
    run = run_;
    if (run && !run->done) {
      run->stopping = true;
      SetState(crest::v1::DAEMON_STOPPING);
    }
  }
  if (run) {
    bool was_running = false;
    {
      absl::MutexLock lock(&mu_);
      was_running = !run->done;
    }
    if (was_running) {
      spdlog::info("stopping daemon pid {} (SIGTERM, grace {})", run->pid,
                   absl::FormatDuration(grace));
      run->process->SignalGroup(SIGTERM).IgnoreError();
      bool done = false;
      {
        absl::MutexLock lock(&mu_);
        done = mu_.AwaitWithTimeout(absl::Condition(
                                        +[](Run* r) { return r->done; }, run.get()),
                                    grace);
      }
      if (!done) {
        spdlog::warn("daemon pid {} ignored SIGTERM for {}; SIGKILL to its group", run->pid,
                     absl::FormatDuration(grace));
        run->process->SignalGroup(SIGKILL).IgnoreError();
        reply.set_killed(true);
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](Run* r) { return r->done; }, run.get()),
                             kReapWait);
      }
    }
    if (run->monitor.joinable()) run->monitor.join();
    reply.set_was_running(was_running);
    {
      absl::MutexLock lock(&mu_);
      reply.set_exit_code(run->exit ? run->exit->code : -1);
      if (run_ == run) run_.reset();
      if (state_ != crest::v1::DAEMON_FAILED || was_running) SetState(crest::v1::DAEMON_STOPPED);
      effective_.clear();
    }
    RemovePidRecord();
  }
  absl::Status restored = config_json_.Restore();
  if (!restored.ok()) spdlog::error("restoring config.json: {}", std::string(restored.message()));
  return reply;
}

}  // namespace crest::agent
