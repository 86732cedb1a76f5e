#include "common/listen_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest {
namespace {

// Below this sit the well-known ports of services a host may start later.
constexpr int kLowestPort = 10000;
constexpr int kHighestPort = 65535;
constexpr int kAttempts = 64;
constexpr PortRange kLinuxDefaultEphemeral{32768, 60999};

// Binds 127.0.0.1:`port` (0: the kernel picks) and returns the bound port, or
// 0 when it is taken.
absl::StatusOr<int> TryBind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = 0;
  int err = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  } else {
    err = errno;
  }
  ::close(fd);
  if (bound != 0 || err == EADDRINUSE) return bound;
  return absl::InternalError(absl::StrCat("binding 127.0.0.1:", port, ": ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<PortRange> ReadEphemeralPortRange(const std::string& proc_root) {
  const std::string path = proc_root + "/sys/net/ipv4/ip_local_port_range";
  CREST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<std::string> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(text), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  PortRange range;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &range.first) ||
      !absl::SimpleAtoi(fields[1], &range.last) || range.first < 1 || range.first > range.last ||
      range.last > kHighestPort) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, R"(: expected two ports "FIRST LAST" with FIRST <= LAST, got ")",
                     absl::StripAsciiWhitespace(text), "\""));
  }
  return range;
}

absl::StatusOr<int> PickListenPort(PortRange ephemeral) {
  std::vector<PortRange> outside;
  if (ephemeral.first > kLowestPort) {
    outside.push_back({kLowestPort, ephemeral.first - 1});
  }
  if (ephemeral.last < kHighestPort) {
    outside.push_back({std::max(kLowestPort, ephemeral.last + 1), kHighestPort});
  }
  int64_t candidates = 0;
  for (const PortRange& r : outside) candidates += r.last - r.first + 1;
  if (candidates > 0) {
    absl::BitGen gen;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      int64_t n = absl::Uniform<int64_t>(gen, 0, candidates);
      int port = 0;
      for (const PortRange& r : outside) {
        const int64_t size = r.last - r.first + 1;
        if (n < size) {
          port = r.first + static_cast<int>(n);
          break;
        }
        n -= size;
      }
      CREST_ASSIGN_OR_RETURN(int bound, TryBind(port));
      if (bound != 0) return bound;
    }
  }
  CREST_ASSIGN_OR_RETURN(int bound, TryBind(0));
  if (bound == 0) return absl::UnavailableError("no free TCP port on 127.0.0.1");
  return bound;
}

absl::StatusOr<int> PickListenPort() {
  absl::StatusOr<PortRange> ephemeral = ReadEphemeralPortRange();
  return PickListenPort(ephemeral.ok() ? *ephemeral : kLinuxDefaultEphemeral);
}

}  // namespace crest
