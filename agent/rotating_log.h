// The daemon's captured output on disk: appends lines to a file and, when it
// grows past a size, rotates it (log -> log.1 -> log.2 ...), keeping a few.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"

namespace crest::agent {

class RotatingLog {
 public:
  RotatingLog(std::string path, uint64_t max_bytes, int keep_files);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  // Opens (appending). Errors name the file.
  absl::Status Open();
  // Writes `line` and a newline; rotates first when the file is full.
  void Append(const std::string& line);
  const std::string& path() const { return path_; }

 private:
  void Rotate();

  std::string path_;
  uint64_t max_bytes_;
  int keep_files_;
  FILE* file_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace crest::agent
