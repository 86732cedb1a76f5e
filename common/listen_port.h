// Picks the TCP port for a server that has to be told its port before it
// starts (mindie-sim's config.json, Prometheus's --web.listen-address), so
// it cannot bind port 0 itself. The port comes from outside the kernel's
// ephemeral range: a port from inside it can be taken by the local end of any
// outgoing connection between the pick and the server's bind, which makes the
// server fail to start on a busy host.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crest {

// Inclusive range of local ports.
struct PortRange {
  int first = 0;
  int last = 0;
};

// The kernel's range for the local end of outgoing connections:
// `proc_root`/sys/net/ipv4/ip_local_port_range.
absl::StatusOr<PortRange> ReadEphemeralPortRange(const std::string& proc_root = "/proc");

// A port on 127.0.0.1 that nothing listens on now, from [10000, 65535]
// outside `ephemeral`; the kernel's choice (bind 0) when that leaves none
// free.
absl::StatusOr<int> PickListenPort(PortRange ephemeral);

// The same with the host's ephemeral range (Linux's default 32768-60999 when
// it cannot be read).
absl::StatusOr<int> PickListenPort();

// A port picked as PickListenPort picks it, and held: a socket stays bound to
// it (not listening, SO_REUSEADDR) for the reservation's life. A pick only
// checks that nothing is bound to the port at that moment, so two processes
// that pick before either server binds can get the same port, and the second
// server fails with "Address already in use". While the port is held, a pick
// in any process passes it over (its probe binds without SO_REUSEADDR), yet a
// server that binds with SO_REUSEADDR, as mindie-sim and Prometheus do, still
// listens on it, and may restart on it. Not for a server that binds without
// SO_REUSEADDR: the reservation makes its bind fail.
class PortReservation {
 public:
  PortReservation() = default;
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();

  int port() const { return port_; }

 private:
  friend absl::StatusOr<PortReservation> ReserveListenPort(PortRange ephemeral);
  PortReservation(int fd, int port) : fd_(fd), port_(port) {}

  int fd_ = -1;
  int port_ = 0;
};

absl::StatusOr<PortReservation> ReserveListenPort(PortRange ephemeral);
absl::StatusOr<PortReservation> ReserveListenPort();

// Reserves a port (the host's ephemeral range), keeps the reservation in
// `held` and returns the port: for a server's config written now and started
// later, while `held` lives.
absl::StatusOr<int> ReserveListenPortInto(std::vector<PortReservation>& held);

}  // namespace crest
