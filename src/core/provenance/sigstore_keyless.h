// Sigstore keyless signatures, verified offline: a bundle (v0.1, v0.2, v0.3)
// whose DSSE envelope is signed by a short-lived Fulcio certificate and
// recorded in a Rekor transparency log, checked against a trust root
// (sigstore_trust_root.h) and the signer's expected identity and OIDC issuer.
//
// The checks, in order; the first that fails throws Error(SignatureInvalid)
// with the reason:
//   1. every transparency-log entry (transparency_log.h): its log is in the
//      trust root, the signed entry timestamp and/or the inclusion proof with its
//      signed checkpoint verify (at least one of the two);
//   2. every entry's body is this envelope's: kind dsse 0.0.1 (the payload's
//      SHA-256, the signature and the certificate it names) or intoto 0.0.2
//      (the payload's SHA-256, the signature and the certificate); others refused;
//   3. the signing certificate was valid at each entry's integratedTime, and
//      chains (OpenSSL, at that time) to the certificate chain of one of the
//      trust root's certificate authorities whose validFor holds that time;
//   4. it may sign (digitalSignature or codeSigning);
//   5. one of its subject alternative names (email or URI) is the identity, exactly;
//   6. its OIDC issuer (Fulcio's extension 1.3.6.1.4.1.57264.1.8, a DER
//      UTF8String, or the older 1.3.6.1.4.1.57264.1.1, raw text) is the issuer, exactly;
//   7. the DSSE signature over PAE(payload) verifies with its key.
// The payload (the statement) is returned unparsed: what it says is the caller's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/provenance/model_signature.h"
#include "core/provenance/sigstore_trust_root.h"

namespace tsarchive {

inline constexpr std::string_view kFulcioIssuerV1Oid = "1.3.6.1.4.1.57264.1.1";
inline constexpr std::string_view kFulcioIssuerV2Oid = "1.3.6.1.4.1.57264.1.8";

// Whom the verifier expects: both are required, compared exactly.
struct KeylessPolicy {
  std::string identity;  // the certificate's SAN: an email address or a URI
  std::string issuer;    // the OIDC issuer URL
};

struct KeylessCheck {
  std::string identity, issuer;       // as the certificate says (equal to the policy's)
  std::string subject, issuer_name;   // the certificate's subject and issuer (RFC 2253)
  std::string key_fingerprint, curve;
  std::string authority;              // the trust root's certificate authority's URI
  std::string log;                    // the log's base URL
  int64_t log_index = 0;
  int64_t integrated_time = 0;        // the first entry's
  bool set_verified = false, inclusion_verified = false;  // by every entry
  std::string payload;
};

// The checks above; `bundle` from parse_bundle(text, true) with keyless() true.
KeylessCheck check_keyless_bundle(const ModelBundle& bundle, const SigstoreTrustRoot& root, const KeylessPolicy& policy);

// The OIDC issuer a Fulcio certificate names, or empty.
std::string fulcio_issuer(const Certificate& certificate);

}  // namespace tsarchive
