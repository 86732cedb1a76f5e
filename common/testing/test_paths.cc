#include "common/testing/test_paths.h"

#include <cstdlib>

namespace crest::testing {
namespace {

std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

}  // namespace

std::string SourceDir() { return EnvOr("CREST_SOURCE_DIR", CREST_SOURCE_DIR_DEFAULT); }
std::string BinDir() { return EnvOr("CREST_BIN_DIR", CREST_BIN_DIR_DEFAULT); }

}  // namespace crest::testing
