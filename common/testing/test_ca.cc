#include "common/testing/test_ca.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest::testing {
namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertDeleter {
  void operator()(X509* c) const { X509_free(c); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using CertPtr = std::unique_ptr<X509, CertDeleter>;

absl::Status OpenSslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("OpenSSL: ", what, " failed"));
}

KeyPtr NewKey() { return KeyPtr(EVP_EC_gen("P-256")); }

std::string KeyToPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(len));
  BIO_free(bio);
  return pem;
}

std::string CertToPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(len));
  BIO_free(bio);
  return pem;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return OpenSslError(absl::StrCat("extension ", value));
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return absl::OkStatus();
}

absl::StatusOr<CertPtr> NewCert(const std::string& cn, EVP_PKEY* key, X509* issuer,
                                EVP_PKEY* issuer_key, bool is_ca, const LeafOptions& leaf = {}) {
  static std::atomic<long> serial{1};
  CertPtr cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), leaf.expired ? -7L * 24 * 3600 : -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), leaf.expired ? -3600 : 7L * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (is_ca) {
    CREST_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    CREST_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    CREST_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints, "CA:FALSE"));
    CREST_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_key_usage,
                                       "critical,digitalSignature,keyEncipherment"));
    CREST_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    std::string san = absl::StrCat("DNS:localhost,DNS:", leaf.dns_name.empty() ? cn : leaf.dns_name,
                                   ",IP:127.0.0.1,IP:::1");
    CREST_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_alt_name, san.c_str()));
  }
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  return cert;
}

KeyPtr KeyFromPem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return KeyPtr(key);
}

CertPtr CertFromPem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return CertPtr(cert);
}

}  // namespace

absl::StatusOr<TestCa> TestCa::Create(const std::string& dir, const std::string& name) {
  TestCa ca;
  ca.dir_ = dir;
  ca.name_ = name;
  KeyPtr key = NewKey();
  if (!key) return OpenSslError("EC key generation");
  CREST_ASSIGN_OR_RETURN(CertPtr cert,
                         NewCert(name + " test CA", key.get(), nullptr, nullptr, true));
  ca.ca_key_pem_ = KeyToPem(key.get());
  ca.ca_cert_pem_ = CertToPem(cert.get());
  ca.ca_cert_file_ = absl::StrCat(dir, "/", name, "-ca.pem");
  CREST_RETURN_IF_ERROR(WriteFileAtomically(ca.ca_cert_file_, ca.ca_cert_pem_));
  return ca;
}

absl::StatusOr<CertFiles> TestCa::Issue(const std::string& common_name) const {
  return Issue(common_name, {}, common_name);
}

absl::StatusOr<CertFiles> TestCa::Issue(const std::string& common_name, const LeafOptions& options,
                                        const std::string& file_tag) const {
  KeyPtr ca_key = KeyFromPem(ca_key_pem_);
  CertPtr ca_cert = CertFromPem(ca_cert_pem_);
  KeyPtr key = NewKey();
  if (!ca_key || !ca_cert || !key) return OpenSslError("loading the CA");
  CREST_ASSIGN_OR_RETURN(
      CertPtr cert, NewCert(common_name, key.get(), ca_cert.get(), ca_key.get(), false, options));
  CertFiles files;
  files.cert = absl::StrCat(dir_, "/", name_, "-", file_tag, ".pem");
  files.key = absl::StrCat(dir_, "/", name_, "-", file_tag, "-key.pem");
  CREST_RETURN_IF_ERROR(WriteFileAtomically(files.cert, CertToPem(cert.get())));
  CREST_RETURN_IF_ERROR(WriteFileAtomically(files.key, KeyToPem(key.get()), 0600));
  return files;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base && *base ? base : "/tmp", "/crest-test-XXXXXX");
  char* made = ::mkdtemp(pattern.data());
  path_ = made ? made : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string TempDir::File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

}  // namespace crest::testing
