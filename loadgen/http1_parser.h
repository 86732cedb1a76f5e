// Incremental parsing of HTTP/1.1 responses as crest-bench's own client reads
// them off a kept-alive connection: status line, headers, and a body framed
// by Content-Length, chunked transfer coding, or the end of the connection.
// Bytes may arrive in any split; the body is handed on as it arrives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

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

  // Parses `bytes`; *consumed is how many belonged to this response (all of
  // them unless it completed, aborted or failed).
  Result Feed(std::string_view bytes, size_t* consumed, Http1Sink& sink);
  // The connection ended: kComplete for a body that runs to the end of the
  // connection, kError (truncated) for anything else.
  Result Eof();

  // Starts over for the next response on the same connection.
  void Reset() { *this = Http1ResponseParser(); }
  // Any byte of this response seen.
  bool started() const { return started_; }
  // The body was being read (the status line and headers were complete).
  bool in_body() const {
    return state_ > State::kHeaders && state_ != State::kDone && state_ != State::kFailed;
  }
  // The connection may carry another request after this response.
  bool keep_alive() const { return keep_alive_; }
  const std::string& error() const { return error_; }

 private:
  enum class State {
    kStatus,
    kHeaders,
    kLengthBody,
    kChunkSize,
    kChunkData,
    kChunkEnd,
    kTrailers,
    kCloseBody,
    kDone,
    kFailed,
  };

  // Takes one line (without CR LF) from `bytes` at *pos into `line`; false
  // when the line is not complete yet (the part is kept in line_).
  bool TakeLine(absl::string_view bytes, size_t* pos, absl::string_view* line);
  bool StatusLine(absl::string_view line);
  bool HeaderLine(absl::string_view line);
  // After the blank line that ends the headers: picks the body framing.
  Result HeadersDone(Http1Sink& sink);
  Result Fail(std::string message);

  State state_ = State::kStatus;
  std::string line_;         // a line split across Feed calls
  bool line_taken_ = false;  // line_ was handed out whole; clear it before the next
  int status_ = 0;
  bool http10_ = false;
  bool keep_alive_ = true;
  bool saw_keep_alive_ = false;
  bool chunked_ = false;
  int64_t content_length_ = -1;
  uint64_t remaining_ = 0;
  bool started_ = false;
  std::string error_;
};

}  // namespace crest::loadgen
