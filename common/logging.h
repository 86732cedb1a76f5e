// Logging set-up for Crest's daemons (spdlog behind one call): a component
// name, a level, stderr and optionally a file. Code logs with spdlog::info etc.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "absl/status/status.h"

namespace crest {

struct LogOptions {
  std::string level = "info";  // trace|debug|info|warn|error|critical|off
  std::string file;            // also log to this file when set
};

// Installs the process's default logger "<component>" with Crest's pattern.
absl::Status InitLogging(const std::string& component, const LogOptions& options);

}  // namespace crest
