// Incremental parsing of HTTP/1.1 responses as crest-bench's own client reads
// them off a kept-alive connection: status line, headers, and a body framed
// by Content-Length, chunked transfer coding, or the end of the connection.
// Bytes may arrive in any split; the body is handed on as it arrives. The
// parsing itself is Boost.Beast's (basic_parser); this class adapts it to the
// client's sink and keeps the header bytes Beast needs whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace crest::loadgen {

// Receives what the parser finds. Returning false from either aborts the
// response (Feed returns kAborted).
class Http1Sink {
 public:
  virtual ~Http1Sink() = default;
  // The final response's status code (interim 1xx responses are skipped).
  virtual bool OnStatus(int code) = 0;
  // Body bytes (chunk framing removed), in order.
  virtual bool OnBody(std::string_view data) = 0;
};

class Http1ResponseParser {
 public:
  enum class Result {
    kNeedMore,  // every byte consumed, the response is not finished
    kComplete,  // the response ended; *consumed says where
    kAborted,   // the sink returned false
    kError,     // not HTTP/1.x as RFC 9112 frames it; see error()
  };

  Http1ResponseParser();
  ~Http1ResponseParser();
  Http1ResponseParser(Http1ResponseParser&&) noexcept;
  Http1ResponseParser& operator=(Http1ResponseParser&&) noexcept;

  // Parses `bytes`; *consumed is how many belonged to this response (all of
  // them unless it completed, aborted or failed).
  Result Feed(std::string_view bytes, size_t* consumed, Http1Sink& sink);
  // The connection ended: kComplete for a body that runs to the end of the
  // connection, kError (truncated) for anything else.
  Result Eof();

  // Starts over for the next response on the same connection.
  void Reset();
  // Any byte of this response seen.
  bool started() const { return started_; }
  // The body was being read (the status line and headers were complete).
  bool in_body() const;
  // The connection may carry another request after this response.
  bool keep_alive() const;
  const std::string& error() const { return error_; }

 private:
  class BeastParser;

  Result Fail(std::string message);

  std::unique_ptr<BeastParser> parser_;
  // Bytes Beast has not taken yet: it parses the status line and headers
  // only once they are complete, from one contiguous buffer.
  std::string pending_;
  bool started_ = false;
  bool failed_ = false;
  std::string error_;
};

}  // namespace crest::loadgen
