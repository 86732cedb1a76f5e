#include "loadgen/http1_parser.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace crest::loadgen {
namespace {

namespace http = boost::beast::http;
using boost::beast::error_code;
using boost::beast::string_view;

constexpr std::uint32_t kHeaderLimit = 16 * 1024;

std::string_view View(string_view s) { return {s.data(), s.size()}; }

}  // namespace

// Beast's response parser with the callbacks forwarded to the current sink.
// Beast takes care of framing (Content-Length, chunked, to the end of the
// connection, no body for 1xx/204/304) and of keep-alive.
class Http1ResponseParser::BeastParser final : public http::basic_parser<false> {
 public:
  BeastParser() {
    header_limit(kHeaderLimit);
    // A stream may run as long as the run does.
    body_limit(std::numeric_limits<std::uint64_t>::max());
    eager(true);  // hand body bytes on as they arrive
  }
  void set_sink(Http1Sink* sink) { sink_ = sink; }
  int status() const { return status_; }
  bool aborted() const { return aborted_; }
  bool header_seen() const { return header_seen_; }

 private:
  void on_request_impl(http::verb /*method*/, string_view /*method_str*/, string_view /*target*/,
                       int /*version*/, error_code& ec) override {
    ec = http::error::bad_method;  // a response parser never sees a request line
  }
  void on_response_impl(int code, string_view /*reason*/, int /*version*/,
                        error_code& /*ec*/) override {
    status_ = code;
  }
  void on_field_impl(http::field /*name*/, string_view /*name_string*/, string_view /*value*/,
                     error_code& /*ec*/) override {}
  void on_header_impl(error_code& ec) override {
    header_seen_ = true;
    if (status_ >= 200 && !sink_->OnStatus(status_)) Abort(ec);
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& /*length*/,
                         error_code& /*ec*/) override {}
  std::size_t on_body_impl(string_view body, error_code& ec) override {
    if (!sink_->OnBody(View(body))) Abort(ec);
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t /*size*/, string_view /*extensions*/,
                            error_code& /*ec*/) override {}
  std::size_t on_chunk_body_impl(std::uint64_t /*remain*/, string_view body,
                                 error_code& ec) override {
    return on_body_impl(body, ec);
  }
  void on_finish_impl(error_code& /*ec*/) override {}

  void Abort(error_code& ec) {
    aborted_ = true;
    // Any error stops Beast; aborted_ tells it apart from a parse error.
    ec = http::error::bad_alloc;
  }

  Http1Sink* sink_ = nullptr;
  int status_ = 0;
  bool header_seen_ = false;
  bool aborted_ = false;
};

Http1ResponseParser::Http1ResponseParser() : parser_(std::make_unique<BeastParser>()) {}
Http1ResponseParser::~Http1ResponseParser() = default;
Http1ResponseParser::Http1ResponseParser(Http1ResponseParser&&) noexcept = default;
Http1ResponseParser& Http1ResponseParser::operator=(Http1ResponseParser&&) noexcept = default;

void Http1ResponseParser::Reset() { *this = Http1ResponseParser(); }

bool Http1ResponseParser::in_body() const {
  return !failed_ && parser_->is_header_done() && !parser_->is_done();
}

bool Http1ResponseParser::keep_alive() const {
  return parser_->is_header_done() && parser_->keep_alive();
}

Http1ResponseParser::Result Http1ResponseParser::Fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  pending_.clear();
  return Result::kError;
}

Http1ResponseParser::Result Http1ResponseParser::Feed(std::string_view bytes, size_t* consumed,
                                                      Http1Sink& sink) {
  *consumed = 0;
  if (failed_) return Result::kError;
  if (parser_->is_done()) return Result::kComplete;
  if (!bytes.empty()) started_ = true;
  parser_->set_sink(&sink);
  // Beast reads from one buffer: what it left over last time, then `bytes`.
  // Past the headers pending_ is empty and `bytes` is parsed in place.
  std::string_view input = bytes;
  size_t carried = 0;  // bytes of `input` that came from pending_
  if (!pending_.empty()) {
    carried = pending_.size();
    pending_.append(bytes.data(), bytes.size());
    input = pending_;
  }
  size_t used = 0;
  while (used < input.size()) {
    error_code ec;
    used += parser_->put(boost::asio::const_buffer(input.data() + used, input.size() - used), ec);
    if (parser_->aborted()) {
      *consumed = used > carried ? used - carried : 0;
      pending_.clear();
      return Result::kAborted;
    }
    if (ec == http::error::need_more) break;
    if (ec) {
      if (ec == http::error::header_limit) return Fail("status line and headers exceed 16 KiB");
      std::string_view near = input.substr(0, 80);
      near = near.substr(0, near.find('\r'));
      return Fail(absl::StrCat("not a valid HTTP/1.x response (", ec.message(), ") near \"",
                               absl::string_view(near.data(), near.size()), "\""));
    }
    if (!parser_->is_done()) continue;
    const int status = parser_->status();
    if (status >= 200) {
      *consumed = used > carried ? used - carried : 0;
      pending_.clear();
      return Result::kComplete;
    }
    // An interim 1xx response: the final one follows on the same connection.
    if (status == 101) return Fail("101 Switching Protocols is not supported");
    parser_ = std::make_unique<BeastParser>();
    parser_->set_sink(&sink);
  }
  // Everything offered belongs to this response; Beast's leftovers (part of
  // the headers) wait in pending_ for the next bytes.
  std::string rest(input.substr(used));
  pending_ = std::move(rest);
  if (pending_.size() > kHeaderLimit) return Fail("status line and headers exceed 16 KiB");
  *consumed = bytes.size();
  return Result::kNeedMore;
}

Http1ResponseParser::Result Http1ResponseParser::Eof() {
  if (failed_) return Result::kError;
  if (parser_->is_done()) return Result::kComplete;
  if (parser_->is_header_done()) {
    error_code ec;
    parser_->put_eof(ec);
    if (!ec && parser_->is_done()) return Result::kComplete;
    return Fail("the connection closed inside the response");
  }
  return Fail(started_ ? "the connection closed inside the response"
                       : "the connection closed before any response");
}

}  // namespace crest::loadgen
