#include "sim/testing/load_client.h"

#include <curl/curl.h>
#include <sys/resource.h>

#include <chrono>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace crest::sim::testing {
namespace {

struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;
  std::string reply;
  size_t scanned = 0;
  int64_t events = 0;
};

int64_t LastNumberAfter(const std::string& text, const std::string& key) {
  size_t pos = text.rfind(key);
  if (pos == std::string::npos) return 0;
  pos += key.size();
  size_t end = pos;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  int64_t v = 0;
  if (!absl::SimpleAtoi(text.substr(pos, end - pos), &v)) return 0;
  return v;
}

size_t OnData(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->reply.append(data, size * n);
  // Count complete SSE events seen so far.
  size_t pos = t->scanned;
  while (true) {
    size_t start = t->reply.find("data: ", pos);
    if (start == std::string::npos) break;
    size_t end = t->reply.find("\n\n", start);
    if (end == std::string::npos) break;
    if (t->reply.compare(start, 12, "data: [DONE]") != 0) ++t->events;
    pos = end + 2;
  }
  t->scanned = pos;
  return size * n;
}

}  // namespace

void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

LoadResult RunLoad(const LoadOptions& options) {
  RaiseFileLimit();
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(options.concurrency));
  LoadResult result;
  size_t next = 0;
  int active = 0;
  auto start = std::chrono::steady_clock::now();
  auto add = [&] {
    auto* t = new Transfer;
    t->body = options.bodies[next++];
    t->easy = curl_easy_init();
    t->headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(t->easy, CURLOPT_URL, options.url.c_str());
    curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body.c_str());
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(options.timeout_seconds * 1000));
    if (!options.ca_file.empty())
      curl_easy_setopt(t->easy, CURLOPT_CAINFO, options.ca_file.c_str());
    curl_multi_add_handle(multi, t->easy);
    ++active;
  };
  while (next < options.bodies.size() && active < options.concurrency) add();
  while (active > 0) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      long status = 0;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
      if (msg->data.result == CURLE_OK && status == 200) {
        ++result.ok;
        result.events += t->events;
        int64_t tokens = LastNumberAfter(t->reply, "\"completion_tokens\":");
        if (tokens == 0) tokens = LastNumberAfter(t->reply, "\"generated_tokens\":");
        result.completion_tokens += tokens;
        if (result.first_body.empty()) result.first_body = t->reply;
      } else {
        ++result.failed;
        if (result.first_error.empty()) {
          result.first_error = absl::StrCat("status ", status, ": ",
                                            curl_easy_strerror(msg->data.result), " ", t->reply);
        }
      }
      curl_multi_remove_handle(multi, msg->easy_handle);
      curl_easy_cleanup(msg->easy_handle);
      curl_slist_free_all(t->headers);
      delete t;
      --active;
      if (next < options.bodies.size()) add();
    }
    if (active > 0) curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  }
  result.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  curl_multi_cleanup(multi);
  return result;
}

}  // namespace crest::sim::testing
