#include "agent/http_probe.h"

#include <curl/curl.h>

#include "absl/strings/str_cat.h"

namespace crest::agent {
namespace {

size_t Discard(char* /*ptr*/, size_t size, size_t nmemb, void* /*user*/) { return size * nmemb; }

struct Body {
  std::string text;
  size_t max_bytes = 0;
  bool truncated = false;
};

size_t Collect(char* ptr, size_t size, size_t nmemb, void* user) {
  auto* body = static_cast<Body*>(user);
  size_t n = size * nmemb;
  if (body->text.size() + n > body->max_bytes) {
    body->truncated = true;
    return 0;  // aborts the transfer
  }
  body->text.append(ptr, n);
  return n;
}

// GET `url`, or POST `post` as JSON when set; the answer's body goes to
// `body` (or is discarded when null).
absl::StatusOr<int> Send(const std::string& url, const std::string* post, absl::Duration timeout,
                         const std::string& ca_file, Body* body) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_slist* headers = nullptr;
  if (post != nullptr) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post->c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(post->size()));
  }
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  if (body != nullptr) {
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
  } else {
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Discard);
  }
  curl_easy_setopt(curl, CURLOPT_PROXY, "");
  if (!ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file.c_str());
  } else {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);
  const char* method = post != nullptr ? "POST " : "GET ";
  if (body != nullptr && body->truncated) {
    return absl::ResourceExhaustedError(
        absl::StrCat(method, url, ": body larger than ", body->max_bytes, " bytes"));
  }
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(method, url, ": ", curl_easy_strerror(rc)));
  }
  return static_cast<int>(code);
}

}  // namespace

absl::StatusOr<int> HttpGetStatus(const std::string& url, absl::Duration timeout,
                                  const std::string& ca_file) {
  return Send(url, nullptr, timeout, ca_file, nullptr);
}

absl::StatusOr<std::string> HttpGetBody(const std::string& url, absl::Duration timeout,
                                        const std::string& ca_file, size_t max_bytes) {
  Body body;
  body.max_bytes = max_bytes;
  absl::StatusOr<int> code = Send(url, nullptr, timeout, ca_file, &body);
  if (!code.ok()) return code.status();
  if (*code != 200) {
    return absl::FailedPreconditionError(absl::StrCat("GET ", url, ": HTTP ", *code));
  }
  return std::move(body.text);
}

absl::StatusOr<std::string> HttpPostJson(const std::string& url, const std::string& json,
                                         absl::Duration timeout, const std::string& ca_file,
                                         size_t max_bytes) {
  Body body;
  body.max_bytes = max_bytes;
  absl::StatusOr<int> code = Send(url, &json, timeout, ca_file, &body);
  if (!code.ok()) return code.status();
  if (*code != 200) {
    return absl::FailedPreconditionError(
        absl::StrCat("POST ", url, ": HTTP ", *code, " ", body.text.substr(0, 200)));
  }
  return std::move(body.text);
}

}  // namespace crest::agent
