#include "cli/rpc_client.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"
#include "cli/commands.h"

namespace crest::cli {
namespace {

// What each code means to the operator: $0 the server ("agent"), $1 its
// address, $2 the call's deadline.
absl::string_view CodeText(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "no error from the $0 at $1";
    case grpc::StatusCode::CANCELLED:
      return "call to the $0 at $1 cancelled";
    case grpc::StatusCode::UNKNOWN:
      return "unknown error from the $0 at $1";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "invalid argument for the $0 at $1";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "no answer from the $0 at $1 within $2 (see --timeout)";
    case grpc::StatusCode::NOT_FOUND:
      return "not found on the $0 at $1";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "already exists on the $0 at $1";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "permission denied by the $0 at $1";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "the $0 at $1 is out of resources";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "refused by the $0 at $1 in its present state";
    case grpc::StatusCode::ABORTED:
      return "aborted by the $0 at $1";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "out of range for the $0 at $1";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "not implemented by the $0 at $1 (another version?)";
    case grpc::StatusCode::INTERNAL:
      return "internal error in the $0 at $1";
    case grpc::StatusCode::UNAVAILABLE:
      return "cannot reach the $0 at $1";
    case grpc::StatusCode::DATA_LOSS:
      return "data loss in the $0 at $1";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "not authenticated by the $0 at $1";
    case grpc::StatusCode::DO_NOT_USE:
      break;
  }
  return "";
}

// Seconds as --timeout takes them: "30", "0.5".
std::string Seconds(absl::Duration d) { return absl::StrFormat("%g", absl::ToDoubleSeconds(d)); }

}  // namespace

void AddEndpointFlags(CLI::App& cmd, Endpoint* endpoint, absl::Duration default_timeout) {
  cmd.add_option(std::string(endpoint->peer.address_flag), endpoint->address,
                 std::string(endpoint->peer.address_help))
      ->required();
  AddTlsFlags(cmd, endpoint->tls);
  cmd.add_option("--tls-server-name", endpoint->tls.server_name_override,
                 absl::StrCat("Name expected in the ", endpoint->peer.name,
                              "'s certificate (default: the dialled host)"))
      ->group("Security");
  cmd.add_option_function<double>(
         "--timeout",
         [endpoint](double seconds) {
           if (!std::isfinite(seconds) || seconds < 0) {
             throw CLI::ValidationError(
                 absl::StrCat("--timeout ", seconds, ": expected seconds >= 0 (0: the default)"));
           }
           endpoint->timeout = absl::Seconds(seconds);
         },
         "Deadline in seconds (0: the default)")
      ->default_str(Seconds(default_timeout));
}

absl::Duration CallTimeout(absl::Duration flag, absl::Duration default_timeout) {
  return flag > absl::ZeroDuration() ? flag : default_timeout;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const Endpoint& endpoint) {
  if (endpoint.address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(endpoint.peer.address_flag, ": required (host:port)"));
  }
  return MakeChannel(endpoint.address, endpoint.tls);
}

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text) {
  if (text == "text") return OutputFormat::kText;
  if (text == "json") return OutputFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("--output \"", text, "\": expected text or json"));
}

void AddOutputFlag(CLI::App& cmd, OutputFormat* format) {
  cmd.add_option_function<std::string>(
         "--output",
         [format](const std::string& text) {
           absl::StatusOr<OutputFormat> parsed = ParseOutputFormat(text);
           if (!parsed.ok()) throw CLI::ValidationError(std::string(parsed.status().message()));
           *format = *parsed;
         },
         "text | json")
      ->default_str("text");
}

std::string RpcErrorText(const CallSite& site, const grpc::Status& status) {
  std::string meaning = absl::Substitute(CodeText(status.error_code()), site.peer, site.address,
                                         absl::FormatDuration(site.timeout));
  if (meaning.empty()) {
    meaning = absl::StrCat("gRPC code ", static_cast<int>(status.error_code()), " from the ",
                           site.peer, " at ", site.address);
  }
  std::string text = absl::StrCat(site.call, ": ", meaning);
  if (!status.error_message().empty()) absl::StrAppend(&text, ": ", status.error_message());
  // One line whatever the server said.
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

RpcCall::RpcCall(const Endpoint& endpoint, std::string call, absl::Duration default_timeout)
    : RpcCall(endpoint, std::move(call),
              absl::Now() + CallTimeout(endpoint.timeout, default_timeout),
              CallTimeout(endpoint.timeout, default_timeout)) {}

RpcCall::RpcCall(const Endpoint& endpoint, std::string call, absl::Time deadline,
                 absl::Duration timeout)
    : site_{std::move(call), endpoint.peer.name, endpoint.address, timeout} {
  context_.set_deadline(absl::ToChronoTime(deadline));
}

absl::Status RpcCall::Error(const grpc::Status& status) const {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      RpcErrorText(site_, status));
}

int RpcCall::Fail(const grpc::Status& status) const {
  return cli::Fail(RpcErrorText(site_, status));
}

}  // namespace crest::cli
