#include "cli/commands.h"

#include <iostream>

namespace crest::cli {

int Fail(absl::string_view message) {
  std::cerr << "crest: " << message << "\n";
  return 1;
}

}  // namespace crest::cli
