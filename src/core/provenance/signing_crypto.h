// The public-key cryptography of model signing, through OpenSSL's libcrypto:
// elliptic-curve keys (P-256, P-384, P-521 only: the curves Sigstore's
// protobuf specs and model_signing accept), ECDSA over SHA-256/384/512 by the
// curve's size, X.509 certificates and their chains.
//
// libcrypto is dlopen()ed at first use (base/runtime_library.h), as for
// SHA-256 in digest.cc, and not linked: linking it would load it at every
// start-up (tests/cli/startup_libraries.sh allows only libc, libm and
// libgcc_s), for the one command that signs. The declarations still come from
// OpenSSL's headers (decltype), so a changed function fails the build.
//
// Private keys stay inside this file's objects: no message, here or above,
// quotes a key's bytes or a password.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct evp_pkey_st;
struct x509_st;

namespace tsarchive {

// What a key of another kind or curve is told.
inline constexpr std::string_view kAcceptedKeys = "EC keys on P-256, P-384 or P-521";

class PublicKey {
 public:
  // From a PEM "PUBLIC KEY" (SubjectPublicKeyInfo) file's text; throws
  // Error(SignatureInvalid) naming `file` for anything else or another curve.
  static PublicKey from_pem(std::string_view pem, const std::string& file);
  // From a DER SubjectPublicKeyInfo (a Sigstore trust root's log keys);
  // nothing for anything that is not an accepted EC key.
  static std::optional<PublicKey> from_der(std::string_view spki);

  // Whether `signature` (DER ECDSA) signs `message`, hashed by the curve's size.
  bool verifies(std::string_view message, std::string_view signature) const;
  // Whether it verifies with SHA-256 whatever the curve (model_signing v0.2's certificates).
  bool verifies_sha256(std::string_view message, std::string_view signature) const;
  // SHA-256 hex of the key's PEM SubjectPublicKeyInfo text: model_signing's
  // key hint in a bundle, and how tsarchive names a signer.
  std::string fingerprint() const;
  std::string curve() const;  // "P-256"
  bool same_key(const PublicKey& other) const;

  std::shared_ptr<evp_pkey_st> pkey;
};

class PrivateKey {
 public:
  // From a PEM private key (PKCS#8, SEC1 "EC PRIVATE KEY", or encrypted with
  // `password`); throws Error(Usage) naming `file`, never quoting it.
  static PrivateKey from_pem(std::string_view pem, const std::string& file, const std::optional<std::string>& password);

  // DER ECDSA signature of `message`, hashed by the curve's size.
  std::string sign(std::string_view message) const;
  PublicKey public_key() const;

  std::shared_ptr<evp_pkey_st> pkey;
};

class Certificate {
 public:
  static Certificate from_der(std::string_view der);  // throws Error(SignatureInvalid)
  std::string der() const;
  std::string subject() const;  // RFC 2253 text
  std::string issuer() const;
  std::string sha256() const;   // of the DER
  // Why it may not sign code, or empty when it may: where present, key usage
  // must include digitalSignature and extended key usage codeSigning (or
  // anyExtendedKeyUsage); a certificate with neither extension may sign.
  std::string signing_usage_problem() const;
  PublicKey public_key() const;  // throws Error(SignatureInvalid) for a key of another kind
  // The subject alternative names that are an email address or a URI, as written.
  std::vector<std::string> san_identities() const;
  // The content of the extension `oid` ("1.3.6.1.4.1.57264.1.1"): the bytes of its
  // OCTET STRING, or nothing when the certificate has none.
  std::optional<std::string> extension_value(const std::string& oid) const;
  // notBefore and notAfter, in seconds since the epoch (UTC).
  std::pair<int64_t, int64_t> validity() const;

  std::shared_ptr<x509_st> x509;
};

// Every certificate of a PEM file ("CERTIFICATE" blocks), in order; throws
// Error(Usage) naming `file` when it holds none or one does not parse.
std::vector<Certificate> certificates_from_pem(std::string_view pem, const std::string& file);

// Why `leaf` does not chain to one of `roots` (through `intermediates`), at
// `at` (seconds since the epoch; the current time when not given); empty when
// it does. OpenSSL's words ("certificate has expired").
std::string chain_problem(const Certificate& leaf, const std::vector<Certificate>& intermediates,
                          const std::vector<Certificate>& roots, std::optional<int64_t> at = std::nullopt);

}  // namespace tsarchive
