#include "loadgen/http1_parser.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace crest::loadgen {
namespace {

constexpr size_t kMaxLine = size_t{16} * 1024;

}  // namespace

bool Http1ResponseParser::TakeLine(absl::string_view bytes, size_t* pos, absl::string_view* line) {
  if (line_taken_) {  // the previous line was handed out from line_: it is used now
    line_.clear();
    line_taken_ = false;
  }
  const size_t nl = bytes.find('\n', *pos);
  if (nl == absl::string_view::npos) {
    line_.append(bytes.data() + *pos, bytes.size() - *pos);
    *pos = bytes.size();
    return false;
  }
  absl::string_view part = bytes.substr(*pos, nl - *pos);
  *pos = nl + 1;
  if (line_.empty()) {
    *line = part;
  } else {
    line_.append(part.data(), part.size());
    *line = line_;
    line_taken_ = true;
  }
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  return true;
}

bool Http1ResponseParser::StatusLine(absl::string_view line) {
  // "HTTP/1.1 200 OK": the reason phrase is optional and ignored.
  if (!absl::StartsWith(line, "HTTP/1.") || line.size() < 12 || line[8] != ' ') return false;
  http10_ = line[7] == '0';
  keep_alive_ = !http10_;
  saw_keep_alive_ = false;
  chunked_ = false;
  content_length_ = -1;
  return absl::SimpleAtoi(line.substr(9, 3), &status_) && status_ >= 100 && status_ <= 999;
}

bool Http1ResponseParser::HeaderLine(absl::string_view line) {
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  const absl::string_view name = line.substr(0, colon);
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (absl::EqualsIgnoreCase(name, "content-length")) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 0) return false;
    if (content_length_ >= 0 && content_length_ != n) return false;  // conflicting lengths
    content_length_ = n;
  } else if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
    // The last coding decides; "chunked" must be last when present (RFC 9112 6.1).
    std::vector<absl::string_view> codings = absl::StrSplit(value, ',');
    chunked_ = absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(codings.back()), "chunked");
  } else if (absl::EqualsIgnoreCase(name, "connection")) {
    for (absl::string_view token : absl::StrSplit(value, ',')) {
      token = absl::StripAsciiWhitespace(token);
      if (absl::EqualsIgnoreCase(token, "close")) keep_alive_ = false;
      if (absl::EqualsIgnoreCase(token, "keep-alive")) saw_keep_alive_ = true;
    }
  }
  return true;
}

Http1ResponseParser::Result Http1ResponseParser::HeadersDone(Http1Sink& sink) {
  if (status_ < 200) {
    // 1xx: an interim response; the final one follows on the same connection.
    if (status_ == 101) return Fail("101 Switching Protocols is not supported");
    state_ = State::kStatus;
    return Result::kNeedMore;
  }
  if (http10_ && saw_keep_alive_) keep_alive_ = true;
  if (!sink.OnStatus(status_)) return Result::kAborted;
  if (status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_) {
    state_ = State::kChunkSize;
  } else if (content_length_ >= 0) {
    remaining_ = static_cast<uint64_t>(content_length_);
    state_ = remaining_ == 0 ? State::kDone : State::kLengthBody;
  } else {
    state_ = State::kCloseBody;  // the body ends with the connection
    keep_alive_ = false;
  }
  return state_ == State::kDone ? Result::kComplete : Result::kNeedMore;
}

Http1ResponseParser::Result Http1ResponseParser::Fail(std::string message) {
  state_ = State::kFailed;
  error_ = std::move(message);
  return Result::kError;
}

Http1ResponseParser::Result Http1ResponseParser::Feed(std::string_view in, size_t* consumed,
                                                      Http1Sink& sink) {
  const absl::string_view bytes(in.data(), in.size());
  if (!bytes.empty()) started_ = true;
  size_t pos = 0;
  auto done = [&](Result r) {
    *consumed = pos;
    return r;
  };
  while (pos < bytes.size()) {
    switch (state_) {
      case State::kDone:
        return done(Result::kComplete);
      case State::kFailed:
        return done(Result::kError);
      case State::kLengthBody:
      case State::kChunkData:
      case State::kCloseBody: {
        size_t n = bytes.size() - pos;
        if (state_ != State::kCloseBody) n = static_cast<size_t>(std::min<uint64_t>(n, remaining_));
        if (!sink.OnBody(std::string_view(bytes.data() + pos, n))) {
          pos += n;
          return done(Result::kAborted);
        }
        pos += n;
        if (state_ == State::kCloseBody) break;
        remaining_ -= n;
        if (remaining_ == 0) {
          state_ = state_ == State::kLengthBody ? State::kDone : State::kChunkEnd;
          if (state_ == State::kDone) return done(Result::kComplete);
        }
        break;
      }
      default: {
        absl::string_view line;
        if (!TakeLine(bytes, &pos, &line)) {
          if (line_.size() > kMaxLine) return done(Fail("line longer than 16 KiB"));
          break;
        }
        if (line.size() > kMaxLine) return done(Fail("line longer than 16 KiB"));
        Result r = Result::kNeedMore;
        switch (state_) {
          case State::kStatus:
            if (!StatusLine(line)) {
              return done(
                  Fail(absl::StrCat("not an HTTP/1.x status line: \"", line.substr(0, 80), "\"")));
            }
            state_ = State::kHeaders;
            break;
          case State::kHeaders:
            if (line.empty()) {
              r = HeadersDone(sink);
            } else if (!HeaderLine(line)) {
              return done(Fail(absl::StrCat("bad header line \"", line.substr(0, 80), "\"")));
            }
            break;
          case State::kChunkSize: {
            const absl::string_view size =
                absl::StripAsciiWhitespace(line.substr(0, line.find(';')));
            uint64_t n = 0;
            if (size.empty() || size.size() > 15 || !absl::SimpleHexAtoi(size, &n)) {
              return done(Fail(absl::StrCat("bad chunk size \"", line.substr(0, 40), "\"")));
            }
            remaining_ = n;
            state_ = n == 0 ? State::kTrailers : State::kChunkData;
            break;
          }
          case State::kChunkEnd:
            if (!line.empty()) return done(Fail("chunk data longer than its size"));
            state_ = State::kChunkSize;
            break;
          case State::kTrailers:
            if (line.empty()) {
              state_ = State::kDone;
              r = Result::kComplete;
            }
            break;
          default:
            break;
        }
        if (r != Result::kNeedMore) return done(r);
        break;
      }
    }
  }
  return done(state_ == State::kDone ? Result::kComplete : Result::kNeedMore);
}

Http1ResponseParser::Result Http1ResponseParser::Eof() {
  if (state_ == State::kCloseBody || state_ == State::kDone) {
    state_ = State::kDone;
    return Result::kComplete;
  }
  if (state_ == State::kFailed) return Result::kError;
  return Fail(started_ ? "the connection closed inside the response"
                       : "the connection closed before any response");
}

}  // namespace crest::loadgen
