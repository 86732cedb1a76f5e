// Test helpers for sim/ unit tests: shipped files from the source tree.
#pragma once

#include <string>

#include "common/file_util.h"
#include "sim/testing/sim_process.h"

namespace crest::sim::testing {

inline std::string TemplateConfigText() {
  return ReadFileToString(SourceDir() + "/sim/conf/config.json").value_or("");
}

inline std::string ProfileDir() { return SourceDir() + "/sim/profiles"; }

}  // namespace crest::sim::testing
