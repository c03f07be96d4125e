#include "core/provenance/sigstore_keyless.h"

#include <algorithm>

#include "base/bounded_json.h"
#include "base/error.h"
#include "core/provenance/digest.h"
#include "core/provenance/signed_json.h"
#include "core/provenance/transparency_log.h"

namespace tsarchive {
namespace {

using nlohmann::json;
using namespace signed_json;

// The content of a DER UTF8String (tag 12, short or long length), or nothing.
std::optional<std::string> der_utf8_string(std::string_view der) {
  if (der.size() < 2 || der[0] != 0x0c) return std::nullopt;
  size_t length = static_cast<unsigned char>(der[1]);
  size_t at = 2;
  if (length & 0x80) {
    const size_t bytes = length & 0x7f;
    if (bytes == 0 || bytes > 4 || der.size() < 2 + bytes) return std::nullopt;
    length = 0;
    for (size_t i = 0; i < bytes; ++i) length = length << 8 | static_cast<unsigned char>(der[2 + i]);
    at += bytes;
  }
  if (der.size() != at + length) return std::nullopt;
  return std::string(der.substr(at));
}

// Whether `encoded` (base64 of a PEM certificate, as Rekor's bodies name a verifier) is `leaf`.
bool names_certificate(const json& encoded, const Certificate& leaf) {
  if (!encoded.is_string()) return false;
  const std::optional<std::string> pem = base64_decode(encoded.get<std::string>());
  if (!pem) return false;
  try {
    const std::vector<Certificate> certs = certificates_from_pem(*pem, "the log entry");
    return certs.size() == 1 && certs.front().der() == leaf.der();
  } catch (const Error&) {
    return false;
  }
}

// Whether `encoded` is base64 of `signature`, or (intoto 0.0.2) base64 of its base64.
bool is_signature(const json& encoded, std::string_view signature) {
  if (!encoded.is_string()) return false;
  std::optional<std::string> raw = base64_decode(encoded.get<std::string>());
  if (raw && *raw == signature) return true;
  if (raw) raw = base64_decode(*raw);
  return raw && *raw == signature;
}

void check_payload_hash(const json& hash, const ModelBundle& bundle) {
  if (string_member(hash, "algorithm", "the entry's payloadHash") != "sha256" ||
      string_member(hash, "value", "the entry's payloadHash") != sha256_hex(bundle.payload)) {
    throw_signature_invalid("its body names another payload (SHA-256) than the bundle's statement");
  }
}

// The body of a dsse 0.0.1 or intoto 0.0.2 entry is this envelope's, signed by `leaf`.
void check_entry_body(const TlogEntry& entry, const ModelBundle& bundle, const Certificate& leaf) {
  std::string problem;
  const std::optional<json> body = parse_bounded_json(entry.body, &problem, 16, kMaxBundleBytes);
  if (!body) throw_signature_invalid("its body is not JSON: " + problem);
  const std::string kind = string_member(*body, "kind", "its body");
  const std::string version = string_member(*body, "apiVersion", "its body");
  if (kind != entry.kind || version != entry.version) {
    throw_signature_invalid("its body is of kind " + kind.substr(0, 40) + " " + version.substr(0, 20) +
                            ", its kindVersion says " + entry.kind.substr(0, 40) + " " + entry.version.substr(0, 20));
  }
  const json& spec = member(*body, "spec", "its body");
  const json* signatures = nullptr;
  const char* verifier_key = nullptr;
  const char* signature_key = nullptr;
  if (kind == "dsse" && version == "0.0.1") {
    check_payload_hash(member(spec, "payloadHash", "its body's spec"), bundle);
    signatures = &array_member(spec, "signatures", "its body's spec");
    verifier_key = "verifier";
    signature_key = "signature";
  } else if (kind == "intoto" && version == "0.0.2") {
    const json& content = member(spec, "content", "its body's spec");
    check_payload_hash(member(content, "payloadHash", "its body's content"), bundle);
    signatures = &array_member(member(content, "envelope", "its body's content"), "signatures", "its body's envelope");
    verifier_key = "publicKey";
    signature_key = "sig";
  } else {
    throw_signature_invalid("it is of kind " + kind.substr(0, 40) + " " + version.substr(0, 20) +
                            "; a DSSE bundle's entry is verified for dsse 0.0.1 and intoto 0.0.2");
  }
  const bool signed_here = std::any_of(signatures->begin(), signatures->end(), [&](const json& s) {
    return s.is_object() && s.contains(verifier_key) && s.contains(signature_key) &&
           names_certificate(s[verifier_key], leaf) && is_signature(s[signature_key], bundle.signature);
  });
  if (signatures->size() != 1 || !signed_here) {
    throw_signature_invalid("its body names another signature or signing certificate than the bundle's");
  }
}

// Step 3: the chain, at `at`, to one of the trust root's authorities valid then; its URI.
std::string trusted_authority(const Certificate& leaf, const std::vector<Certificate>& intermediates,
                              const SigstoreTrustRoot& root, int64_t at) {
  const auto [not_before, not_after] = leaf.validity();
  if (at < not_before || at > not_after) {
    throw_signature_invalid("the log integrated the signature at " + format_utc(at) +
                            ", outside the signing certificate's validity (" + format_utc(not_before) + " to " +
                            format_utc(not_after) + ")");
  }
  std::string why = "no certificate authority of the trust root was valid at " + format_utc(at);
  for (const CertificateAuthority& authority : root.certificate_authorities) {
    if (!authority.valid_for.contains(at)) continue;
    const std::string problem = chain_problem(leaf, intermediates, authority.chain, at);
    if (problem.empty()) return authority.uri;
    why = problem;
  }
  throw_signature_invalid("the signing certificate does not chain to a certificate authority of the trust root: " + why);
}

void check_identity(const Certificate& leaf, const KeylessPolicy& policy, KeylessCheck& check) {
  if (const std::string why = leaf.signing_usage_problem(); !why.empty()) {
    throw_signature_invalid("the signing certificate may not sign: " + why);
  }
  const std::vector<std::string> names = leaf.san_identities();
  if (std::find(names.begin(), names.end(), policy.identity) == names.end()) {
    throw_signature_invalid("the signer is " + (names.empty() ? std::string("nobody named") : "'" + names.front().substr(0, 200) + "'") +
                                ", not '" + policy.identity.substr(0, 200) + "'",
                            {}, "--identity must equal the certificate's email or URI exactly");
  }
  check.identity = policy.identity;
  check.issuer = fulcio_issuer(leaf);
  if (check.issuer != policy.issuer) {
    throw_signature_invalid("the signer's identity was issued by '" + check.issuer.substr(0, 200) + "', not '" +
                                policy.issuer.substr(0, 200) + "'",
                            {}, "--issuer must equal the OIDC issuer URL exactly");
  }
}

}  // namespace

std::string fulcio_issuer(const Certificate& certificate) {
  if (const auto v2 = certificate.extension_value(std::string(kFulcioIssuerV2Oid))) {
    if (auto text = der_utf8_string(*v2)) return *text;
  }
  if (auto v1 = certificate.extension_value(std::string(kFulcioIssuerV1Oid))) return *v1;
  return {};
}

KeylessCheck check_keyless_bundle(const ModelBundle& bundle, const SigstoreTrustRoot& root, const KeylessPolicy& policy) {
  if (!bundle.keyless() || bundle.certificates.empty()) {
    throw_signature_invalid("the bundle is not a Sigstore keyless signature (no transparency-log entry or no certificate)");
  }
  std::vector<Certificate> chain;
  for (const std::string& der : bundle.certificates) chain.push_back(Certificate::from_der(der));
  const Certificate& leaf = chain.front();
  const std::vector<Certificate> intermediates(chain.begin() + 1, chain.end());
  KeylessCheck check;
  check.subject = leaf.subject();
  check.issuer_name = leaf.issuer();
  const std::vector<TlogEntry> entries = parse_tlog_entries(bundle.tlog_entries_json);
  check.set_verified = check.inclusion_verified = true;
  // The certificate is checked at a time something signed: the log's signed
  // entry timestamp. An inclusion proof does not cover integratedTime, so an
  // entry with a proof alone could be given any time, such as one inside an
  // expired certificate's validity (sigstore-python: "not enough sources of
  // verified time"). RFC 3161 timestamps are not read (see docs/signing.md).
  bool timed = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    try {
      const TlogVerdict verdict = verify_tlog_entry(entries[i], root);
      check_entry_body(entries[i], bundle, leaf);
      check.set_verified = check.set_verified && verdict.set_verified;
      check.inclusion_verified = check.inclusion_verified && verdict.inclusion_verified;
      if (i == 0) check.log = verdict.log->base_url;
    } catch (const Error& e) {
      throw_signature_invalid("the transparency-log entry " + std::to_string(entries[i].log_index) + ": " + e.what());
    }
    if (entries[i].signed_entry_timestamp.empty()) continue;  // its time is not signed
    check.authority = trusted_authority(leaf, intermediates, root, entries[i].integrated_time);
    timed = true;
  }
  if (!timed) {
    throw_signature_invalid("no source of verified time: no transparency-log entry has a signed entry timestamp "
                            "(inclusionPromise), and an inclusion proof does not sign integratedTime, so nothing "
                            "vouches that the short-lived certificate was valid when it signed",
                            {}, "sign it again with a Sigstore client that records the log's signed entry timestamp");
  }
  check.log_index = entries.front().log_index;
  check.integrated_time = entries.front().integrated_time;
  check_identity(leaf, policy, check);
  const PublicKey key = leaf.public_key();
  check.key_fingerprint = key.fingerprint();
  check.curve = key.curve();
  if (!key.verifies(dsse_pae(bundle.payload), bundle.signature)) {
    throw_signature_invalid("the signature does not verify with the signing certificate's key: the statement was changed",
                            {}, "do not deploy this model");
  }
  check.payload = bundle.payload;
  return check;
}

}  // namespace tsarchive
