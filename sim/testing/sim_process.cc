#include "sim/testing/sim_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"

#include "common/file_util.h"

namespace crest::sim::testing {

nlohmann::json TestConfig() {
  std::string text = ReadFileToString(SourceDir() + "/sim/conf/config.json").value_or("{}");
  nlohmann::json j = nlohmann::json::parse(text);
  j["ServerConfig"]["ipAddress"] = "127.0.0.1";
  j["ServerConfig"]["managementIpAddress"] = "127.0.0.1";
  j["ServerConfig"]["port"] = 0;
  j["ServerConfig"]["managementPort"] = 0;
  j["ServerConfig"]["metricsPort"] = 0;
  return j;
}

absl::StatusOr<std::unique_ptr<SimProcess>> SimProcess::Start(
    const std::string& dir, const nlohmann::json& config, const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env) {
  std::string conf_dir = absl::StrCat(dir, "/conf");
  std::filesystem::create_directories(conf_dir);
  std::string config_path = absl::StrCat(conf_dir, "/config.json");
  absl::Status written = WriteFileAtomically(config_path, config.dump(2), 0640);
  if (!written.ok()) return written;
  std::string binary = BinDir() + "/mindie-sim";
  std::vector<std::string> argv_s = {binary, "--config", config_path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // As the agent does for the daemon it starts: MindIE serves /metrics only then.
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos) vars[std::string(kv.substr(0, eq))] = kv.substr(eq + 1);
  }
  vars["MIES_SERVICE_MONITOR_MODE"] = "1";
  for (const auto& [k, v] : env) vars[k] = v;
  std::vector<std::string> env_s;
  env_s.reserve(vars.size());
  for (const auto& [k, v] : vars) env_s.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  envp.reserve(env_s.size() + 1);
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<SimProcess> p(new SimProcess());
  p->pid_ = pid;
  p->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  p->reader_ = std::thread([raw = p.get(), fd = fds[0]] { raw->ReadLoop(fd); });
  return p;
}

SimProcess::~SimProcess() {
  if (!exit_code_.has_value() && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (reader_.joinable()) reader_.join();
  if (pidfd_ >= 0) close(pidfd_);
}

void SimProcess::ReadLoop(int fd) {
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    std::lock_guard<std::mutex> lock(mu_);
    output_.append(buf, static_cast<size_t>(n));
    cv_.notify_all();
  }
  close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

std::optional<std::string> SimProcess::WaitForLine(const std::string& text, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::optional<std::string> found;
  cv_.wait_until(lock, deadline, [&] {
    size_t pos = output_.find(text);
    if (pos != std::string::npos) {
      size_t begin = output_.rfind('\n', pos);
      begin = begin == std::string::npos ? 0 : begin + 1;
      size_t end = output_.find('\n', pos);
      found = output_.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      return true;
    }
    return eof_;
  });
  return found;
}

bool SimProcess::WaitReady(double timeout_s) {
  std::optional<std::string> line = WaitForLine("mindie-sim: listening", timeout_s);
  if (!line) return false;
  std::smatch m;
  static const std::regex listening_re(
      R"(business=[0-9.]+:(\d+) management=[0-9.]+:(\d+) metrics=[0-9.]+:(\d+))");
  if (!std::regex_search(*line, m, listening_re)) return false;
  business_port = std::stoi(m[1]);
  management_port = std::stoi(m[2]);
  metrics_port = std::stoi(m[3]);
  return WaitForLine("Daemon start success!", timeout_s).has_value();
}

std::optional<int> SimProcess::WaitExit(double timeout_s) {
  if (exit_code_) return exit_code_;
  pollfd pfd{pidfd_, POLLIN, 0};
  if (poll(&pfd, 1, static_cast<int>(timeout_s * 1000)) <= 0) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, 0) != pid_) return std::nullopt;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // The pipe closes with the process: wait until its last output is read.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::seconds(5), [this] { return eof_; });
  return exit_code_;
}

void SimProcess::Signal(int signo) { kill(pid_, signo); }

std::string SimProcess::Output() {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

}  // namespace crest::sim::testing
