#include "agent/rotating_log.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace crest::agent {

RotatingLog::RotatingLog(std::string path, uint64_t max_bytes, int keep_files)
    : path_(std::move(path)), max_bytes_(max_bytes), keep_files_(keep_files) {}

RotatingLog::~RotatingLog() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status RotatingLog::Open() {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  file_ = std::fopen(path_.c_str(), "ae");
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("opening daemon log ", path_, ": ", std::strerror(errno)));
  }
  struct stat st {};
  size_ = ::stat(path_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return absl::OkStatus();
}

void RotatingLog::Rotate() {
  std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  for (int i = keep_files_ - 1; i >= 1; --i) {
    std::string from = i == 1 ? path_ : absl::StrCat(path_, ".", i - 1);
    std::filesystem::rename(from, absl::StrCat(path_, ".", i), ec);
  }
  if (keep_files_ <= 1) std::filesystem::remove(path_, ec);
  file_ = std::fopen(path_.c_str(), "we");
  size_ = 0;
}

void RotatingLog::Append(const std::string& line) {
  if (file_ == nullptr) return;
  if (size_ + line.size() + 1 > max_bytes_ && size_ > 0) Rotate();
  if (file_ == nullptr) return;
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
  size_ += line.size() + 1;
}

}  // namespace crest::agent
