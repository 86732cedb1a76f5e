// Picks the TCP port for a server that has to be told its port before it
// starts (mindie-sim's config.json, Prometheus's --web.listen-address), so
// it cannot bind port 0 itself. The port comes from outside the kernel's
// ephemeral range: a port from inside it can be taken by the local end of any
// outgoing connection between the pick and the server's bind, which makes the
// server fail to start on a busy host.
#pragma once

#include <string>

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

}  // namespace crest
