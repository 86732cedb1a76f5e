// Where tests find the source tree and the built binaries: $CREST_SOURCE_DIR
// and $CREST_BIN_DIR (ctest sets both), else the tree and the build's bin/
// this was compiled from, so a test binary also runs by hand.
#pragma once

#include <string>

namespace crest::testing {

std::string SourceDir();
std::string BinDir();

}  // namespace crest::testing
