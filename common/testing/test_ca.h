// A throwaway certificate authority for tests: a CA, and leaf certificates
// for servers (SAN localhost, 127.0.0.1, ::1) and clients, written as PEM
// files into a directory. Built with OpenSSL's libcrypto.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace crest::testing {

struct CertFiles {
  std::string cert;
  std::string key;
};

// Variations of a leaf certificate for tests of what a server refuses.
struct LeafOptions {
  bool expired = false;  // notAfter an hour ago
  // Replaces DNS:<common_name> among the SANs (empty: keep it).
  std::string dns_name;
};

class TestCa {
 public:
  // Creates "<dir>/<name>-ca.pem" (and its key) for a new CA.
  static absl::StatusOr<TestCa> Create(const std::string& dir, const std::string& name);

  // Issues a leaf certificate valid for TLS server and client use, with
  // subject CN=`common_name` and SANs DNS:localhost, DNS:<common_name>,
  // IP:127.0.0.1, IP:::1.
  absl::StatusOr<CertFiles> Issue(const std::string& common_name) const;
  // The same with `options`; files are named after `file_tag`.
  absl::StatusOr<CertFiles> Issue(const std::string& common_name, const LeafOptions& options,
                                  const std::string& file_tag) const;

  const std::string& ca_file() const { return ca_cert_file_; }

 private:
  std::string dir_;
  std::string name_;
  std::string ca_cert_file_;
  std::string ca_key_pem_;
  std::string ca_cert_pem_;
};

// A fresh directory under $TMPDIR removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(absl::string_view name) const;

 private:
  std::string path_;
};

}  // namespace crest::testing
