#include "common/paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace crest {

absl::StatusOr<std::string> ExecutableDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return absl::InternalError(absl::StrCat("reading /proc/self/exe: ", ec.message()));
  return exe.parent_path().string();
}

absl::StatusOr<std::string> ShareDir() {
  if (const char* env = std::getenv("CREST_SHARE_DIR"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  absl::StatusOr<std::string> dir = ExecutableDir();
  if (!dir.ok()) return dir.status();
  std::filesystem::path share = std::filesystem::path(*dir).parent_path() / "share" / "crest";
  return share.lexically_normal().string();
}

}  // namespace crest
