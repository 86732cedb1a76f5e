#include "agent/http_probe.h"

#include <curl/curl.h>

#include "absl/strings/str_cat.h"

namespace crest::agent {
namespace {

size_t Discard(char* /*ptr*/, size_t size, size_t nmemb, void* /*user*/) { return size * nmemb; }

}  // namespace

absl::StatusOr<int> HttpGetStatus(const std::string& url, absl::Duration timeout,
                                  const std::string& ca_file) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Discard);
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
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", curl_easy_strerror(rc)));
  }
  return static_cast<int>(code);
}

}  // namespace crest::agent
