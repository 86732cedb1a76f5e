#include "common/listen_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
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

// A socket bound to 127.0.0.1:`port` (0: the kernel picks), without
// SO_REUSEADDR so that a port another socket is bound to counts as taken,
// whatever that socket's options; fd -1 and port 0 when it is taken.
struct Bound {
  int fd = -1;
  int port = 0;
};
absl::StatusOr<Bound> TryBind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    return Bound{fd, ntohs(addr.sin_port)};
  }
  const int err = errno;
  ::close(fd);
  if (err == EADDRINUSE) return Bound{};
  return absl::InternalError(absl::StrCat("binding 127.0.0.1:", port, ": ", std::strerror(err)));
}

// A free port as PickListenPort describes it, still bound.
absl::StatusOr<Bound> BindFreePort(PortRange ephemeral) {
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
      CREST_ASSIGN_OR_RETURN(Bound bound, TryBind(port));
      if (bound.fd >= 0) return bound;
    }
  }
  CREST_ASSIGN_OR_RETURN(Bound bound, TryBind(0));
  if (bound.fd < 0) return absl::UnavailableError("no free TCP port on 127.0.0.1");
  return bound;
}

PortRange HostEphemeralRange() {
  absl::StatusOr<PortRange> ephemeral = ReadEphemeralPortRange();
  return ephemeral.ok() ? *ephemeral : kLinuxDefaultEphemeral;
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
  CREST_ASSIGN_OR_RETURN(Bound bound, BindFreePort(ephemeral));
  ::close(bound.fd);
  return bound.port;
}

absl::StatusOr<int> PickListenPort() { return PickListenPort(HostEphemeralRange()); }

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(std::exchange(other.port_, 0)) {}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = std::exchange(other.port_, 0);
  }
  return *this;
}

PortReservation::~PortReservation() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<PortReservation> ReserveListenPort(PortRange ephemeral) {
  CREST_ASSIGN_OR_RETURN(Bound bound, BindFreePort(ephemeral));
  // Set after the bind: bound with it, the probe would have shared the port
  // with another reservation. Set now, it lets a SO_REUSEADDR server bind
  // beside it (Linux checks each bound socket's flag at the server's bind).
  const int on = 1;
  if (::setsockopt(bound.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0) {
    const int err = errno;
    ::close(bound.fd);
    return absl::InternalError(
        absl::StrCat("SO_REUSEADDR on 127.0.0.1:", bound.port, ": ", std::strerror(err)));
  }
  return PortReservation(bound.fd, bound.port);
}

absl::StatusOr<PortReservation> ReserveListenPort() {
  return ReserveListenPort(HostEphemeralRange());
}

absl::StatusOr<int> ReserveListenPortInto(std::vector<PortReservation>& held) {
  CREST_ASSIGN_OR_RETURN(PortReservation reservation, ReserveListenPort());
  held.push_back(std::move(reservation));
  return held.back().port();
}

}  // namespace crest
