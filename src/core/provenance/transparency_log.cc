#include "core/provenance/transparency_log.h"

#include "base/bounded_json.h"
#include "base/error.h"
#include "core/provenance/digest.h"
#include "core/provenance/signed_json.h"

namespace tsarchive {
namespace {

using nlohmann::json;
using namespace signed_json;

// Most entries a bundle may carry, and most hashes a proof may list (a tree of 2^64 leaves needs 64).
constexpr size_t kMaxEntries = 16;
constexpr size_t kMaxProofHashes = 64;

std::string sha256_raw(std::string_view bytes) { return hex_to_bytes(sha256_hex(bytes)); }

std::string hash_member(const json& object, const char* key, const std::string& where) {
  std::string hash = base64_member(object, key, where);
  if (hash.size() != 32) throw_signature_invalid(where + "'s \"" + key + "\" is not a SHA-256 hash");
  return hash;
}

InclusionProof parse_inclusion_proof(const json& proof, const std::string& where) {
  only_members(proof, {"logIndex", "rootHash", "treeSize", "hashes", "checkpoint"}, where);
  InclusionProof out;
  out.log_index = int64_member(proof, "logIndex", where);
  out.tree_size = int64_member(proof, "treeSize", where);
  out.root_hash = hash_member(proof, "rootHash", where);
  const json& hashes = array_member(proof, "hashes", where);
  if (hashes.size() > kMaxProofHashes) throw_signature_invalid(where + " lists more than 64 hashes");
  for (const json& hash : hashes) {
    if (!hash.is_string()) throw_signature_invalid(where + " has a hash that is not a string");
    std::optional<std::string> raw = base64_decode(hash.get<std::string>());
    if (!raw || raw->size() != 32) throw_signature_invalid(where + " has a hash that is not base64 SHA-256");
    out.hashes.push_back(std::move(*raw));
  }
  const json& checkpoint = member(proof, "checkpoint", where);
  only_members(checkpoint, {"envelope"}, where + ".checkpoint");
  out.checkpoint = string_member(checkpoint, "envelope", where + ".checkpoint");
  return out;
}

TlogEntry parse_entry(const json& entry, size_t index) {
  const std::string where = "the transparency-log entry " + std::to_string(index);
  only_members(entry,
               {"logIndex", "logId", "kindVersion", "integratedTime", "inclusionPromise", "inclusionProof",
                "canonicalizedBody"},
               where);
  TlogEntry out;
  out.log_index = int64_member(entry, "logIndex", where);
  const json& log_id = member(entry, "logId", where);
  only_members(log_id, {"keyId"}, where + "'s logId");
  out.log_id = base64_member(log_id, "keyId", where + "'s logId");
  const json& kind = member(entry, "kindVersion", where);
  only_members(kind, {"kind", "version"}, where + "'s kindVersion");
  out.kind = string_member(kind, "kind", where + "'s kindVersion");
  out.version = string_member(kind, "version", where + "'s kindVersion");
  out.integrated_time = int64_member(entry, "integratedTime", where);
  if (const json* promise = optional_member(entry, "inclusionPromise")) {
    only_members(*promise, {"signedEntryTimestamp"}, where + "'s inclusionPromise");
    out.signed_entry_timestamp = base64_member(*promise, "signedEntryTimestamp", where + "'s inclusionPromise");
  }
  if (const json* proof = optional_member(entry, "inclusionProof")) {
    out.inclusion_proof = parse_inclusion_proof(*proof, where + "'s inclusionProof");
  }
  out.body = base64_member(entry, "canonicalizedBody", where);
  return out;
}

// A checkpoint (signed note), split.
struct Checkpoint {
  std::string signed_text;  // the note up to and including its last line's '\n'
  std::string origin;
  int64_t size = -1;
  std::string root_hash;  // raw
  struct Signature {
    std::string name, key_hint, signature;
  };
  std::vector<Signature> signatures;
};

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string_view::npos) break;
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::optional<Checkpoint::Signature> parse_note_signature(std::string_view line) {
  static constexpr std::string_view kDash = "\xe2\x80\x94 ";  // U+2014 EM DASH, then a space
  if (line.substr(0, kDash.size()) != kDash) return std::nullopt;
  line.remove_prefix(kDash.size());
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0) return std::nullopt;
  std::optional<std::string> raw = base64_decode(line.substr(space + 1));
  if (!raw || raw->size() < 5) return std::nullopt;
  return Checkpoint::Signature{std::string(line.substr(0, space)), raw->substr(0, 4), raw->substr(4)};
}

Checkpoint parse_checkpoint(std::string_view note) {
  const size_t blank = note.find("\n\n");
  if (blank == std::string_view::npos || note.find("\n\n", blank + 1) != std::string_view::npos || note.back() != '\n') {
    throw_signature_invalid("its checkpoint is not a signed note (one blank line before the signatures)");
  }
  Checkpoint out;
  out.signed_text = std::string(note.substr(0, blank + 1));
  const std::vector<std::string_view> lines = split_lines(out.signed_text);
  const std::optional<json> size = lines.size() >= 3 ? parse_bounded_json(lines[1]) : std::nullopt;
  std::optional<std::string> root = lines.size() >= 3 ? base64_decode(lines[2]) : std::nullopt;
  if (lines.size() < 3 || lines[0].empty() || !size || !size->is_number_unsigned() || !root || root->size() != 32) {
    throw_signature_invalid("its checkpoint does not start with an origin, a tree size and a root hash");
  }
  out.origin = std::string(lines[0]);
  out.size = static_cast<int64_t>(size->get<uint64_t>());
  out.root_hash = std::move(*root);
  for (std::string_view line : split_lines(note.substr(blank + 2))) {
    std::optional<Checkpoint::Signature> signature = parse_note_signature(line);
    if (!signature) throw_signature_invalid("its checkpoint has a signature line that is not '— NAME BASE64'");
    out.signatures.push_back(std::move(*signature));
  }
  return out;
}

void verify_checkpoint(const InclusionProof& proof, const TransparencyLogKey& log) {
  const Checkpoint checkpoint = parse_checkpoint(proof.checkpoint);
  bool signed_by_log = false;
  for (const Checkpoint::Signature& s : checkpoint.signatures) {
    if (s.key_hint != log.key_id.substr(0, 4)) continue;  // a witness's, or another log's
    if (!log.key->verifies(checkpoint.signed_text, s.signature)) {
      throw_signature_invalid("its checkpoint's signature (" + s.name.substr(0, 80) + ") does not verify with the log's key");
    }
    signed_by_log = true;
  }
  if (!signed_by_log) throw_signature_invalid("its checkpoint is not signed by the log's key");
  if (checkpoint.root_hash != proof.root_hash || checkpoint.size != proof.tree_size) {
    throw_signature_invalid("its checkpoint names another tree (size " + std::to_string(checkpoint.size) +
                            ") than the inclusion proof (size " + std::to_string(proof.tree_size) + ")");
  }
}

void verify_inclusion(const TlogEntry& entry, const TransparencyLogKey& log) {
  const InclusionProof& proof = *entry.inclusion_proof;
  const std::optional<std::string> root =
      merkle_root_from_proof(merkle_leaf_hash(entry.body), proof.log_index, proof.tree_size, proof.hashes);
  if (!root) {
    throw_signature_invalid("its inclusion proof has " + std::to_string(proof.hashes.size()) +
                            " hashes, which does not fit index " + std::to_string(proof.log_index) + " in a tree of " +
                            std::to_string(proof.tree_size));
  }
  if (*root != proof.root_hash) {
    throw_signature_invalid("its inclusion proof does not lead to the root hash: the entry or a hash was changed");
  }
  verify_checkpoint(proof, log);
}

}  // namespace

std::vector<TlogEntry> parse_tlog_entries(std::string_view tlog_entries_json) {
  std::string problem;
  const std::optional<json> doc = parse_bounded_json(tlog_entries_json, &problem, 16, kMaxBundleBytes, 1u << 16);
  if (!doc || !doc->is_array()) throw_signature_invalid("the bundle's tlogEntries is not a JSON list");
  if (doc->size() > kMaxEntries) throw_signature_invalid("the bundle has more than 16 transparency-log entries");
  std::vector<TlogEntry> out;
  for (size_t i = 0; i < doc->size(); ++i) out.push_back(parse_entry((*doc)[i], i));
  return out;
}

std::string signed_entry_timestamp_payload(const TlogEntry& entry) {
  // Keys in RFC 8785 order; every value is ASCII (base64, hex, integers), so no escaping applies.
  return "{\"body\":\"" + base64_encode(entry.body) + "\",\"integratedTime\":" + std::to_string(entry.integrated_time) +
         ",\"logID\":\"" + to_hex(entry.log_id) + "\",\"logIndex\":" + std::to_string(entry.log_index) + "}";
}

std::string merkle_leaf_hash(std::string_view leaf) {
  std::string input(1, '\0');
  input.append(leaf);
  return sha256_raw(input);
}

std::string merkle_node_hash(std::string_view left, std::string_view right) {
  std::string input(1, '\1');
  input.append(left);
  input.append(right);
  return sha256_raw(input);
}

std::optional<std::string> merkle_root_from_proof(std::string_view leaf_hash, int64_t index, int64_t tree_size,
                                                  const std::vector<std::string>& hashes) {
  // RFC 9162, 2.1.3.2: walk up from the leaf; fn is the node's index, sn the last index at that level.
  if (index < 0 || tree_size <= 0 || index >= tree_size) return std::nullopt;
  auto fn = static_cast<uint64_t>(index);
  auto sn = static_cast<uint64_t>(tree_size - 1);
  std::string node(leaf_hash);
  for (const std::string& sibling : hashes) {
    if (sn == 0) return std::nullopt;
    if ((fn & 1) != 0 || fn == sn) {
      node = merkle_node_hash(sibling, node);
      while ((fn & 1) == 0 && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      node = merkle_node_hash(node, sibling);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return std::nullopt;
  return node;
}

TlogVerdict verify_tlog_entry(const TlogEntry& entry, const SigstoreTrustRoot& root) {
  TlogVerdict verdict;
  verdict.log = root.log(entry.log_id);
  if (verdict.log == nullptr) {
    throw_signature_invalid("its log (key id " + to_hex(entry.log_id).substr(0, 64) + ") is not in the trust root");
  }
  const TransparencyLogKey& log = *verdict.log;
  if (!log.key) {
    throw_signature_invalid("its log's key in the trust root (" + log.key_details.substr(0, 40) +
                            ") is not one tsarchive verifies with (" + std::string(kAcceptedKeys) + ")");
  }
  if (!log.valid_for.contains(entry.integrated_time)) {
    throw_signature_invalid("its integratedTime " + format_utc(entry.integrated_time) +
                            " is outside the log key's validFor in the trust root");
  }
  if (entry.signed_entry_timestamp.empty() && !entry.inclusion_proof) {
    throw_signature_invalid("it has neither a signed entry timestamp nor an inclusion proof");
  }
  if (!entry.signed_entry_timestamp.empty()) {
    if (!log.key->verifies(signed_entry_timestamp_payload(entry), entry.signed_entry_timestamp)) {
      throw_signature_invalid("its signed entry timestamp does not verify with the log's key: the entry was changed "
                              "or signed by another log");
    }
    verdict.set_verified = true;
  }
  if (entry.inclusion_proof) {
    verify_inclusion(entry, log);
    verdict.inclusion_verified = true;
  }
  return verdict;
}

}  // namespace tsarchive
