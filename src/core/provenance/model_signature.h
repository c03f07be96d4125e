// OpenSSF model signing's signature format (the `model_signing` package, 1.x),
// read and written here without its library.
//
// A signature is a Sigstore bundle, JSON (protobuf JSON names):
//   {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
//    "verificationMaterial": {"publicKey": {"hint": H}            key method
//                           | "x509CertificateChain": {"certificates":
//                               [{"rawBytes": base64 DER}, ...]}, certificate method:
//                                                                 the signer's first
//                             "tlogEntries": []},
//    "dsseEnvelope": {"payload": base64 STATEMENT, "payloadType": "application/vnd.in-toto+json",
//                     "signatures": [{"sig": base64 DER ECDSA, "keyid": ""}]}}
// H is the SHA-256 hex of the public key's PEM SubjectPublicKeyInfo text.
// The signature is over DSSE's PAE:
//   "DSSEv1 28 application/vnd.in-toto+json " LEN(STATEMENT) " " STATEMENT
// with ECDSA and SHA-256/384/512 by the curve (P-256/384/521). Signatures
// model_signing 0.2 wrote are over "DSSEV1 28 application/vnd.in-toto+json LEN
// b'...'" (Python's repr of the bytes): read, never written.
//
// STATEMENT is an in-toto v1 statement (JSON):
//   {"_type": "https://in-toto.io/Statement/v1",
//    "subject": [{"name": MODEL NAME, "digest": {"sha256": ROOT}}],
//    "predicateType": "https://model_signing/signature/v1.0",
//    "predicate": {"serialization": {"method": "files", "hash_type": "sha256",
//                                    "allow_symlinks": false, "ignore_paths": [...]},
//                  "resources": [{"name": N, "algorithm": "sha256", "digest": HEX}, ...]}}
// N is a file's path relative to the model directory ('/'-separated), or "."
// for a model that is one file. ROOT is SHA-256 over the resources' raw
// digests concatenated in the order listed (sorted by path components when
// written). The 0.2 predicate "https://model_signing/Digests/v0.1" lists the
// files as the subjects instead and has no root.
//
// Not supported, and refused with the reason: the "shards" serialization,
// hash types other than sha256, several signatures. Bundles with transparency-log
// entries (Sigstore keyless signing) are read with allow_keyless and checked by
// sigstore_keyless.h.
//
// Everything here is untrusted input: the bundle is size- and depth-bounded
// (bounded_json.h), base64 is checked, and every name is checked before any
// path is made of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tsarchive {

inline constexpr std::string_view kBundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json";
inline constexpr std::string_view kInTotoPayloadType = "application/vnd.in-toto+json";
inline constexpr std::string_view kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr std::string_view kPredicateV1 = "https://model_signing/signature/v1.0";
inline constexpr std::string_view kPredicateV01 = "https://model_signing/Digests/v0.1";
// The most verify reads of a signature, and so the most sign writes (sign
// refuses more, signature_size_problem): a signature file of 64 MiB, and a
// statement of 2^20 JSON values (about 100 MB parsed). A file is 7 values of
// the statement, so a signature lists at most some 149,000 files, fewer when
// their names are long (4 KiB names: some 12,000 before the 64 MiB).
inline constexpr uint64_t kMaxBundleBytes = 64ull << 20;
inline constexpr uint64_t kMaxStatementValues = 1ull << 20;
inline constexpr uint64_t kStatementValuesPerFile = 7;
// The paths model_signing leaves out by default, and so does sign.
inline const std::vector<std::string> kGitPaths = {".git", ".gitattributes", ".github", ".gitignore"};

struct SignedFile {
  std::string name;    // '/'-separated, relative; "." for a one-file model
  std::string sha256;  // lowercase hex; empty for what verify found that is no file (not_a_file)
  std::string not_a_file = {};  // verify: why it was not hashed ("a symbolic link"); never in a statement
};

struct ModelStatement {
  std::string predicate_type = std::string(kPredicateV1);
  std::string model_name;
  std::string root_sha256;  // empty for the v0.1 predicate
  std::vector<SignedFile> files;
  std::vector<std::string> ignore_paths;  // relative to the model
  bool allow_symlinks = false;
};

struct ModelBundle {
  std::string payload;       // the statement's bytes
  std::string payload_type;
  std::string signature;     // DER ECDSA
  bool has_public_key = false;  // verificationMaterial.publicKey (key method)
  std::string key_hint;         // may be empty (older bundles)
  std::vector<std::string> certificates;  // DER, the signer's first (certificate method)
  std::string media_type;
  // verificationMaterial.tlogEntries as JSON text when it has entries: a
  // Sigstore keyless bundle (sigstore_keyless.h reads them).
  std::string tlog_entries_json;
  bool keyless() const { return !tlog_entries_json.empty(); }
};

// Why `name` cannot be a file of a model ("an absolute path", "a '..'
// component"), or empty when it can.
std::string signed_name_problem(std::string_view name);

// Sorted as model_signing sorts paths (by components), so the statement is canonical.
void sort_signed_files(std::vector<SignedFile>& files);

// SHA-256 hex over the files' raw digests in their order.
std::string files_root_digest(const std::vector<SignedFile>& files);

std::string statement_json(const ModelStatement& statement);
std::string bundle_json(const ModelBundle& bundle);

// Why verify would not read a signature file of `bundle_bytes` bytes whose
// statement is `statement_text` (over kMaxBundleBytes or kMaxStatementValues),
// or empty when it would.
std::string signature_size_problem(uint64_t bundle_bytes, std::string_view statement_text);

// DSSE's pre-authentication encoding of an in-toto payload, and model_signing 0.2's.
std::string dsse_pae(std::string_view payload);
std::string dsse_pae_v02(std::string_view payload);

// Parse; throw Error(SignatureInvalid) with the reason (no file: the caller adds it).
// `allow_keyless`: also Sigstore keyless bundles (v0.1, v0.2, v0.3: transparency
// log entries, v0.3's single "certificate"), whose entries are left in
// tlog_entries_json; otherwise a bundle with entries is refused.
ModelBundle parse_bundle(std::string_view text, bool allow_keyless = false);
// Checks the statement's type, predicate, names (signed_name_problem, no
// duplicates), digests and root.
ModelStatement parse_statement(std::string_view payload);

}  // namespace tsarchive
