// Sigstore's trust root (trusted_root.json, media type
// application/vnd.dev.sigstore.trustedroot+json;version=0.1, protobuf JSON of
// sigstore/protobuf-specs' TrustedRoot): whom a keyless signature's verifier
// trusts, offline.
//
//   {"mediaType": ...,
//    "tlogs": [{"baseUrl": URL, "hashAlgorithm": "SHA2_256",
//               "publicKey": {"rawBytes": base64 DER SubjectPublicKeyInfo, "keyDetails": ...,
//                             "validFor": {"start": RFC 3339, "end": RFC 3339}},
//               "logId": {"keyId": base64}}, ...],              Rekor, the transparency logs
//    "certificateAuthorities": [{"subject": ..., "uri": URL,
//               "certChain": {"certificates": [{"rawBytes": base64 DER}, ...]},
//               "validFor": {"start": ..., "end": ...}}, ...],  Fulcio
//    "ctlogs": [...], "timestampAuthorities": [...]}         counted, not used
//
// A log key that is not an EC key on P-256/384/521 (Rekor v2's Ed25519) is
// kept, unusable: an entry of that log fails with the reason. Untrusted input
// like a bundle: size- and depth-bounded, every member type-checked.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/provenance/signing_crypto.h"

namespace tsarchive {

inline constexpr std::string_view kTrustRootMediaType = "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
// The largest trust root read (the production one is about 9 KiB).
inline constexpr uint64_t kMaxTrustRootBytes = 4ull << 20;

// validFor: seconds since the epoch; an absent end is open.
struct ValidityPeriod {
  int64_t start = std::numeric_limits<int64_t>::min();
  int64_t end = std::numeric_limits<int64_t>::max();
  bool contains(int64_t at) const { return at >= start && at <= end; }
};

struct TransparencyLogKey {
  std::string base_url;
  std::string key_id;            // logId.keyId, raw bytes (SHA-256 of the key's DER for Rekor v1)
  std::optional<PublicKey> key;  // nothing: not a key tsarchive verifies with
  std::string key_details;       // "PKIX_ECDSA_P256_SHA_256", as written
  ValidityPeriod valid_for;
};

struct CertificateAuthority {
  std::string uri;
  std::vector<Certificate> chain;  // as listed: the issuing certificate first, the root last
  ValidityPeriod valid_for;
};

struct SigstoreTrustRoot {
  std::vector<TransparencyLogKey> tlogs;
  std::vector<CertificateAuthority> certificate_authorities;
  size_t ctlogs = 0, timestamp_authorities = 0;

  // The log whose logId is `key_id`, or nullptr.
  const TransparencyLogKey* log(std::string_view key_id) const;
};

// Parses a trust root; throws Error(SignatureInvalid) with the reason (no
// file: the caller adds it).
SigstoreTrustRoot parse_trust_root(std::string_view text);

// RFC 3339 UTC ("2022-12-31T23:59:59.999Z", "2021-03-07T03:20:29Z", an offset
// "+01:00" too) in whole seconds since the epoch (fractions dropped); nothing
// when it is not one.
std::optional<int64_t> parse_rfc3339(std::string_view text);

// "2024-06-10T19:47:25Z".
std::string format_utc(int64_t seconds);

}  // namespace tsarchive
