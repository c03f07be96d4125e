// A Sigstore bundle's transparency-log entries (Rekor v1), read from the
// bundle's verificationMaterial.tlogEntries and checked offline against the
// trust root's log keys:
//
//   {"logIndex": "N", "logId": {"keyId": base64}, "kindVersion": {"kind": "dsse", "version": "0.0.1"},
//    "integratedTime": "SECONDS", "inclusionPromise": {"signedEntryTimestamp": base64 DER ECDSA},
//    "inclusionProof": {"logIndex": "N", "rootHash": base64, "treeSize": "N", "hashes": [base64, ...],
//                       "checkpoint": {"envelope": SIGNED NOTE}},
//    "canonicalizedBody": base64 JSON}
//
// The signed entry timestamp (SET) is the log's ECDSA signature (SHA-256) over
// the canonical JSON (RFC 8785: keys sorted, no spaces)
//   {"body":"<canonicalizedBody, base64>","integratedTime":N,"logID":"<keyId, hex>","logIndex":N}
// The inclusion proof is RFC 6962's: leaf SHA-256(0x00 || body), nodes
// SHA-256(0x01 || left || right), from the proof's logIndex (the index within
// the log's current shard) up to rootHash in a tree of treeSize leaves. The
// checkpoint is a signed note (transparency-dev's format):
//   "<origin>\n<treeSize>\n<rootHash base64>\n[other lines\n]" "\n"
//   "— <name> <base64(keyId[0:4] || signature)>\n"...
// its signature over the text before the blank line, its size and root equal
// to the proof's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/provenance/model_signature.h"
#include "core/provenance/sigstore_trust_root.h"

namespace tsarchive {

struct InclusionProof {
  int64_t log_index = 0;
  int64_t tree_size = 0;
  std::string root_hash;            // raw, 32 bytes
  std::vector<std::string> hashes;  // raw, 32 bytes each
  std::string checkpoint;           // the signed note's text
};

struct TlogEntry {
  int64_t log_index = 0;
  std::string log_id;  // raw
  std::string kind, version;
  int64_t integrated_time = 0;
  std::string signed_entry_timestamp;  // raw DER; empty when the bundle has none
  std::optional<InclusionProof> inclusion_proof;
  std::string body;  // canonicalizedBody, decoded
};

// The entries of tlog_entries_json (ModelBundle); throws Error(SignatureInvalid).
std::vector<TlogEntry> parse_tlog_entries(std::string_view tlog_entries_json);

// The canonical JSON the SET signs.
std::string signed_entry_timestamp_payload(const TlogEntry& entry);

// RFC 6962 hashes.
std::string merkle_leaf_hash(std::string_view leaf);
std::string merkle_node_hash(std::string_view left, std::string_view right);
// The root an inclusion proof leads to from `leaf_hash` at `index` in a tree of
// `tree_size` leaves, or nothing when the proof has the wrong length for them.
std::optional<std::string> merkle_root_from_proof(std::string_view leaf_hash, int64_t index, int64_t tree_size,
                                                  const std::vector<std::string>& hashes);

// What checking an entry established.
struct TlogVerdict {
  const TransparencyLogKey* log = nullptr;
  bool set_verified = false;
  bool inclusion_verified = false;  // the Merkle proof and its signed checkpoint
};

// Checks `entry` against `root`: its log is one of the root's, the log's key
// was valid at integratedTime, the SET (when present) verifies, the inclusion
// proof (when present) leads to its root hash and its checkpoint is signed by
// the log and names that root and size; at least one of the two is required.
// Throws Error(SignatureInvalid) with the reason.
TlogVerdict verify_tlog_entry(const TlogEntry& entry, const SigstoreTrustRoot& root);

}  // namespace tsarchive
