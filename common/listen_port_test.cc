#include "common/listen_port.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "common/file_util.h"
#include "common/status.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::crest::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A listening socket on 127.0.0.1:`port`; -1 when that port is taken.
// `reuse_address`: bound with SO_REUSEADDR, as mindie-sim's and Prometheus's
// listeners are.
int Listen(int port, bool reuse_address = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  if (reuse_address) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 1) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

absl::StatusOr<PortRange> ReadFrom(TempDir& dir, const std::string& contents) {
  CREST_RETURN_IF_ERROR(MakeDirectories(dir.File("sys/net/ipv4")));
  CREST_RETURN_IF_ERROR(
      WriteFileAtomically(dir.File("sys/net/ipv4/ip_local_port_range"), contents));
  return ReadEphemeralPortRange(dir.path());
}

TEST(ListenPort, ReadsTheKernelsTabSeparatedRange) {
  TempDir dir;
  auto range = ReadFrom(dir, "32768\t60999\n");
  CREST_ASSERT_OK(range.status());
  EXPECT_EQ(range->first, 32768);
  EXPECT_EQ(range->last, 60999);
}

TEST(ListenPort, ABadRangeIsAnErrorNamingTheFileAndWhatWasExpected) {
  TempDir dir;
  for (const char* bad : {"60999 32768\n", "32768\n", "a b\n", "1 70000\n", ""}) {
    EXPECT_THAT(ReadFrom(dir, bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("ip_local_port_range"), HasSubstr("FIRST <= LAST"))))
        << bad;
  }
  EXPECT_THAT(ReadEphemeralPortRange(dir.File("missing")).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("ip_local_port_range")));
}

TEST(ListenPort, PicksAFreePortOutsideTheEphemeralRange) {
  const PortRange ephemeral{32768, 60999};
  for (int i = 0; i < 20; ++i) {
    auto port = PickListenPort(ephemeral);
    CREST_ASSERT_OK(port.status());
    EXPECT_GE(*port, 10000);
    EXPECT_TRUE(*port < ephemeral.first || *port > ephemeral.last) << *port;
    int fd = Listen(*port);
    EXPECT_GE(fd, 0) << "port " << *port << " was picked but cannot be listened on";
    if (fd >= 0) ::close(fd);
  }
}

TEST(ListenPort, SkipsATakenPortAndFallsBackToTheKernelsChoice) {
  // The only candidate outside [10000, 65534] is 65535; held, it is skipped.
  int held = Listen(65535);
  auto port = PickListenPort({10000, 65534});
  CREST_ASSERT_OK(port.status());
  EXPECT_NE(*port, 65535);
  int fd = Listen(*port);
  EXPECT_GE(fd, 0) << *port;
  if (fd >= 0) ::close(fd);
  if (held >= 0) ::close(held);
}

TEST(ListenPort, AnEphemeralRangeCoveringEveryPortLeavesTheKernelsChoice) {
  auto port = PickListenPort({1, 65535});
  CREST_ASSERT_OK(port.status());
  int fd = Listen(*port);
  EXPECT_GE(fd, 0) << *port;
  if (fd >= 0) ::close(fd);
}

// With [10000, 65534] ephemeral the only candidate is 65535, so every pick
// below wants the reserved port.
TEST(ListenPort, AReservedPortIsPassedOverByEveryPickYetAReuseAddressServerListensOnIt) {
  const PortRange only_65535{10000, 65534};
  auto reserved = ReserveListenPort(only_65535);
  CREST_ASSERT_OK(reserved.status());
  ASSERT_EQ(reserved->port(), 65535) << "65535 is in use on this machine";
  auto picked = PickListenPort(only_65535);
  CREST_ASSERT_OK(picked.status());
  EXPECT_NE(*picked, 65535);
  auto second = ReserveListenPort(only_65535);
  CREST_ASSERT_OK(second.status());
  EXPECT_NE(second->port(), 65535);
  EXPECT_EQ(Listen(65535), -1) << "a server without SO_REUSEADDR must see the port taken";
  // The server the port was reserved for binds, listens, and restarts on it.
  for (int start = 0; start < 2; ++start) {
    int fd = Listen(65535, /*reuse_address=*/true);
    EXPECT_GE(fd, 0) << "start " << start;
    if (fd >= 0) ::close(fd);
  }
}

TEST(ListenPort, AReservationHoldsItsPortUntilItsLastOwnerEnds) {
  const PortRange only_65535{10000, 65534};
  std::optional<PortReservation> moved;
  {
    auto reserved = ReserveListenPort(only_65535);
    CREST_ASSERT_OK(reserved.status());
    ASSERT_EQ(reserved->port(), 65535) << "65535 is in use on this machine";
    moved.emplace(*std::move(reserved));
  }
  EXPECT_EQ(moved->port(), 65535);
  EXPECT_EQ(Listen(65535), -1) << "the moved-from reservation let the port go";
  moved.reset();
  int fd = Listen(65535);
  EXPECT_GE(fd, 0) << "the port stayed held after its reservation ended";
  if (fd >= 0) ::close(fd);
}

TEST(ListenPort, ReservedIntoAListThePortIsHeldThere) {
  std::vector<PortReservation> held;
  auto first = ReserveListenPortInto(held);
  auto second = ReserveListenPortInto(held);
  CREST_ASSERT_OK(first.status());
  CREST_ASSERT_OK(second.status());
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].port(), *first);
  EXPECT_EQ(held[1].port(), *second);
  EXPECT_NE(*first, *second);
  EXPECT_EQ(Listen(*first), -1) << "port " << *first << " is not held";
}

}  // namespace
}  // namespace crest
