#include "loadgen/reply_scan.h"

#include <charconv>
#include <string>

namespace crest::loadgen {
namespace {

// Nesting deeper than this is refused rather than recursed into.
constexpr int kMaxDepth = 256;

// What a value is to crest-bench, from where it sits.
enum class Role {
  kOther,
  kRoot,
  kError,
  kGeneratedText,
  kToken,
  kDetails,
  kDetailsGenerated,
  kDetailsPrompt,
  kChoices,
  kChoice0,
  kFinishReason,
  kUsage,
  kUsageCompletion,
  kUsagePrompt,
};

enum class Kind { kScalar, kObject, kArray };

// The role of member `key` of an object that has role `parent`.
Role MemberRole(Role parent, std::string_view key) {
  switch (parent) {
    case Role::kRoot:
      if (key == "token") return Role::kToken;
      if (key == "details") return Role::kDetails;
      if (key == "generated_text") return Role::kGeneratedText;
      if (key == "choices") return Role::kChoices;
      if (key == "usage") return Role::kUsage;
      if (key == "error") return Role::kError;
      return Role::kOther;
    case Role::kDetails:
      if (key == "generated_tokens") return Role::kDetailsGenerated;
      if (key == "prompt_tokens") return Role::kDetailsPrompt;
      return Role::kOther;
    case Role::kUsage:
      if (key == "completion_tokens") return Role::kUsageCompletion;
      if (key == "prompt_tokens") return Role::kUsagePrompt;
      return Role::kOther;
    case Role::kChoice0:
      return key == "finish_reason" ? Role::kFinishReason : Role::kOther;
    default:
      return Role::kOther;
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Scanner {
 public:
  Scanner(std::string_view text, ReplyFields& fields)
      : p_(text.data()), end_(text.data() + text.size()), f_(fields) {}

  bool Run() {
    SkipSpace();
    if (p_ == end_ || *p_ != '{') return false;
    if (!Value(Role::kRoot, 0)) return false;
    SkipSpace();
    return p_ == end_;
  }

 private:
  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  void Mark(Role role, Kind kind) {
    const bool object = kind == Kind::kObject;
    switch (role) {
      case Role::kError:
        f_.error = true;
        break;
      case Role::kGeneratedText:
        f_.generated_text = true;
        break;
      case Role::kToken:
        f_.token = true;
        f_.token_object = object;
        break;
      case Role::kDetails:
        f_.details = true;
        f_.details_object = object;
        f_.details_generated = f_.details_prompt = -1;  // a repeated key: the last one counts
        break;
      case Role::kChoices:
        f_.choices_array = kind == Kind::kArray;
        f_.choice0 = f_.choice0_object = f_.finish_reason_string = false;
        break;
      case Role::kChoice0:
        f_.choice0 = true;
        f_.choice0_object = object;
        break;
      case Role::kUsage:
        f_.usage_object = object;
        f_.usage_completion = f_.usage_prompt = -1;
        break;
      default:
        break;
    }
  }

  bool Value(Role role, int depth) {
    SkipSpace();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{':
        Mark(role, Kind::kObject);
        return depth < kMaxDepth && Object(role, depth + 1);
      case '[':
        Mark(role, Kind::kArray);
        return depth < kMaxDepth && Array(role, depth + 1);
      case '"':
        Mark(role, Kind::kScalar);
        if (role == Role::kFinishReason) f_.finish_reason_string = true;
        return String(nullptr);
      case 't':
        Mark(role, Kind::kScalar);
        return Word("true");
      case 'f':
        Mark(role, Kind::kScalar);
        return Word("false");
      case 'n':
        Mark(role, Kind::kScalar);
        return Word("null");
      default:
        Mark(role, Kind::kScalar);
        return Number(role);
    }
  }

  // Skips space, then `c` if it is next.
  bool Take(char c) {
    SkipSpace();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  enum class After { kMore, kEnd, kBad };
  // After a member or an element: a comma (more follow) or the closing `close`.
  After Next(char close) {
    if (Take(',')) return After::kMore;
    return Take(close) ? After::kEnd : After::kBad;
  }

  bool Object(Role role, int depth) {
    ++p_;  // '{'
    if (Take('}')) return true;
    std::string key;
    After after = After::kMore;
    while (after == After::kMore) {
      SkipSpace();
      if (p_ == end_ || *p_ != '"') return false;
      key.clear();
      if (!String(&key) || !Take(':') || !Value(MemberRole(role, key), depth)) return false;
      after = Next('}');
    }
    return after == After::kEnd;
  }

  bool Array(Role role, int depth) {
    ++p_;  // '['
    if (Take(']')) return true;
    After after = After::kMore;
    for (size_t i = 0; after == After::kMore; ++i) {
      if (!Value(role == Role::kChoices && i == 0 ? Role::kChoice0 : Role::kOther, depth)) {
        return false;
      }
      after = Next(']');
    }
    return after == After::kEnd;
  }

  bool Word(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; integers of the roles
  // that carry token counts are kept (those beyond int64 are not integers).
  bool Number(Role role) {
    const char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (IsDigit(*p_)) {
      while (p_ != end_ && IsDigit(*p_)) ++p_;
    } else {
      return false;
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ != end_ && IsDigit(*p_)) ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      while (p_ != end_ && IsDigit(*p_)) ++p_;
    }
    int64_t* out = nullptr;
    if (role == Role::kDetailsGenerated) out = &f_.details_generated;
    if (role == Role::kDetailsPrompt) out = &f_.details_prompt;
    if (role == Role::kUsageCompletion) out = &f_.usage_completion;
    if (role == Role::kUsagePrompt) out = &f_.usage_prompt;
    if (out != nullptr) {
      int64_t v = -1;
      if (!integer || std::from_chars(start, p_, v).ec != std::errc()) v = -1;
      *out = v;
    }
    return true;
  }

  // Four hex digits after "\u".
  bool Hex4(uint32_t* code) {
    if (end_ - p_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = HexDigit(p_[i]);
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    p_ += 4;
    *code = v;
    return true;
  }

  // One UTF-8 sequence of two to four bytes starting at p_ (RFC 3629).
  bool Utf8() {
    const auto b0 = static_cast<unsigned char>(*p_);
    int more = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      more = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      more = 2;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      more = 3;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (end_ - p_ <= more) return false;
    for (int i = 1; i <= more; ++i) {
      const auto b = static_cast<unsigned char>(p_[i]);
      if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return false;
    }
    p_ += more + 1;
    return true;
  }

  // A string starting at the opening quote; its decoded text goes to `out`
  // when wanted (keys), with code points beyond ASCII as 0xFF (no key matches).
  bool String(std::string* out) {
    ++p_;  // '"'
    while (true) {
      const char* run = p_;
      while (p_ != end_) {
        const auto c = static_cast<unsigned char>(*p_);
        if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
        ++p_;
      }
      if (out != nullptr) out->append(run, p_);
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        const char* seq = p_;
        if (!Utf8()) return false;
        if (out != nullptr) out->append(seq, p_);
        continue;
      }
      // A backslash escape.
      ++p_;
      if (p_ == end_) return false;
      const char e = *p_++;
      char plain = 0;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          plain = e;
          break;
        case 'b':
          plain = '\b';
          break;
        case 'f':
          plain = '\f';
          break;
        case 'n':
          plain = '\n';
          break;
        case 'r':
          plain = '\r';
          break;
        case 't':
          plain = '\t';
          break;
        case 'u': {
          uint32_t code = 0;
          if (!Hex4(&code)) return false;
          if (code >= 0xDC00 && code <= 0xDFFF) return false;  // a lone low surrogate
          if (code >= 0xD800 && code <= 0xDBFF) {
            uint32_t low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            if (!Hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
          }
          plain = code < 0x80 ? static_cast<char>(code) : '\xFF';
          break;
        }
        default:
          return false;
      }
      if (out != nullptr) out->push_back(plain);
    }
  }

  const char* p_;
  const char* const end_;
  ReplyFields& f_;
};

}  // namespace

bool ScanReply(std::string_view text, ReplyFields& fields) {
  // A UTF-8 byte order mark is skipped, as nlohmann's parser does.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  return Scanner(text, fields).Run();
}

}  // namespace crest::loadgen
