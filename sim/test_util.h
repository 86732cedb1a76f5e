// Test helpers for sim/ unit tests: shipped files from the source tree.
#pragma once

#include <cstdlib>
#include <string>

#include "common/file_util.h"

namespace crest::sim::testing {

inline std::string SourceDir() {
  const char* dir = std::getenv("CREST_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

inline std::string TemplateConfigText() {
  return ReadFileToString(SourceDir() + "/sim/conf/config.json").value_or("");
}

inline std::string ProfileDir() { return SourceDir() + "/sim/profiles"; }

}  // namespace crest::sim::testing
