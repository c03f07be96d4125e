#include "core/provenance/model_signature.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/bounded_json.h"
#include "base/error.h"
#include "base/terminal_text.h"
#include "base/utf8.h"
#include "core/provenance/digest.h"
#include "core/provenance/signed_json.h"

namespace tsarchive {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using signed_json::base64_member;
using signed_json::hex_to_bytes;
using signed_json::member;
using signed_json::only_members;
using signed_json::string_member;

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    out.push_back(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

bool is_lower_hex(std::string_view text, size_t length) {
  return text.size() == length &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Python's repr() of bytes, as model_signing 0.2 put the payload into its PAE.
std::string python_bytes_repr(std::string_view bytes) {
  const bool has_single = bytes.find('\'') != std::string_view::npos;
  const bool has_double = bytes.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out = "b";
  out += quote;
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  out += quote;
  return out;
}

SignedFile parse_resource(const json& resource) {
  SignedFile file;
  file.name = string_member(resource, "name", "a resource");
  if (const std::string algorithm = string_member(resource, "algorithm", "a resource"); algorithm != "sha256") {
    throw_signature_invalid("resource '" + file.name.substr(0, 200) + "' is hashed with '" + algorithm.substr(0, 40) +
                            "'; only sha256 is supported");
  }
  file.sha256 = string_member(resource, "digest", "a resource");
  return file;
}

void check_files(const std::vector<SignedFile>& files) {
  std::set<std::string_view> seen;
  for (const SignedFile& f : files) {
    if (const std::string why = signed_name_problem(f.name); !why.empty()) {
      throw_signature_invalid("the statement names '" + f.name.substr(0, 200) + "': " + why);
    }
    if (!is_lower_hex(f.sha256, 64)) {
      throw_signature_invalid("the statement's digest of '" + f.name.substr(0, 200) + "' is not 64 lowercase hex digits");
    }
    if (!seen.insert(f.name).second) throw_signature_invalid("the statement names '" + f.name.substr(0, 200) + "' twice");
  }
  if (files.size() > 1 && seen.count(".") != 0) {
    throw_signature_invalid("the statement names the whole model ('.') beside other files");
  }
}

}  // namespace

std::string signed_name_problem(std::string_view name) {
  if (name == ".") return {};
  if (name.empty()) return "an empty name";
  if (name.front() == '/') return "an absolute path";
  if (name.find('\0') != std::string_view::npos) return "a NUL byte";
  for (std::string_view part : components(name)) {
    if (part.empty()) return "an empty path component";
    if (part == "..") return "a '..' component: a file outside the model";
    if (part == ".") return "a '.' component";
  }
  return {};
}

void sort_signed_files(std::vector<SignedFile>& files) {
  std::sort(files.begin(), files.end(),
            [](const SignedFile& a, const SignedFile& b) { return components(a.name) < components(b.name); });
}

std::string files_root_digest(const std::vector<SignedFile>& files) {
  std::string raw;
  raw.reserve(files.size() * 32);
  for (const SignedFile& f : files) raw += hex_to_bytes(f.sha256);
  return sha256_hex(raw);
}

std::string statement_json(const ModelStatement& statement) {
  ordered_json resources = ordered_json::array();
  for (const SignedFile& f : statement.files) {
    // A statement is JSON text: a name that is not UTF-8 has no spelling in it (nor in model_signing's).
    if (!is_valid_utf8(f.name)) {
      throw_bad_input("the file name '" + escape_text(f.name) + "' is not UTF-8, which a signature cannot name",
                      statement.model_name, "rename it, or leave it out with --ignore-paths");
    }
    resources.push_back(ordered_json{{"name", f.name}, {"algorithm", "sha256"}, {"digest", f.sha256}});
  }
  ordered_json serialization = {{"method", "files"}, {"hash_type", "sha256"}, {"allow_symlinks", statement.allow_symlinks}};
  if (!statement.ignore_paths.empty()) serialization["ignore_paths"] = statement.ignore_paths;
  const ordered_json doc = {
      {"_type", kStatementType},
      {"subject", ordered_json::array({ordered_json{{"name", statement.model_name},
                                                    {"digest", {{"sha256", files_root_digest(statement.files)}}}}})},
      {"predicateType", kPredicateV1},
      {"predicate", {{"serialization", std::move(serialization)}, {"resources", std::move(resources)}}},
  };
  return doc.dump(2);
}

std::string signature_size_problem(uint64_t bundle_bytes, std::string_view statement_text) {
  if (bundle_bytes > kMaxBundleBytes) {
    return "the signature would be " + std::to_string(bundle_bytes) + " bytes, more than the 64 MiB verify reads";
  }
  if (auto why = json_limit_problem(statement_text, 64, kMaxBundleBytes, kMaxStatementValues)) {
    return "the signed statement would be more than verify reads: " + *why;
  }
  return "";
}

std::string bundle_json(const ModelBundle& bundle) {
  ordered_json material;
  if (bundle.certificates.empty()) {
    material["publicKey"] = {{"hint", bundle.key_hint}};
  } else {
    ordered_json chain = ordered_json::array();
    for (const std::string& der : bundle.certificates) chain.push_back({{"rawBytes", base64_encode(der)}});
    material["x509CertificateChain"] = {{"certificates", std::move(chain)}};
  }
  material["tlogEntries"] = ordered_json::array();
  const ordered_json doc = {
      {"mediaType", kBundleMediaType},
      {"verificationMaterial", std::move(material)},
      {"dsseEnvelope",
       {{"payload", base64_encode(bundle.payload)},
        {"payloadType", kInTotoPayloadType},
        {"signatures", ordered_json::array({ordered_json{{"sig", base64_encode(bundle.signature)}, {"keyid", ""}}})}}},
  };
  return doc.dump();
}

std::string dsse_pae(std::string_view payload) {
  return "DSSEv1 " + std::to_string(kInTotoPayloadType.size()) + " " + std::string(kInTotoPayloadType) + " " +
         std::to_string(payload.size()) + " " + std::string(payload);
}

std::string dsse_pae_v02(std::string_view payload) {
  return "DSSEV1 " + std::to_string(kInTotoPayloadType.size()) + " " + std::string(kInTotoPayloadType) + " " +
         std::to_string(payload.size()) + " " + python_bytes_repr(payload);
}

namespace {

// A keyless bundle's media type: v0.1 and v0.2 as they were named, v0.3 both ways.
bool keyless_media_type(std::string_view media) {
  return media == kBundleMediaType || media == "application/vnd.dev.sigstore.bundle+json;version=0.1" ||
         media == "application/vnd.dev.sigstore.bundle+json;version=0.2" ||
         media == "application/vnd.dev.sigstore.bundle+json;version=0.3";
}

// timestampVerificationData: RFC 3161 timestamps, not read (docs/signing.md),
// but held to the schema as the rest of the bundle.
void check_timestamp_data(const json& data) {
  only_members(data, {"rfc3161Timestamps"}, "the bundle's timestampVerificationData");
  const json* stamps = signed_json::optional_member(data, "rfc3161Timestamps");
  if (stamps == nullptr) return;
  if (!stamps->is_array()) throw_signature_invalid("the bundle's rfc3161Timestamps is not a list");
  for (const json& stamp : *stamps) only_members(stamp, {"signedTimestamp"}, "an RFC 3161 timestamp");
}

// verificationMaterial's key or certificates into `bundle`: publicKey (key
// method), x509CertificateChain, or v0.3's single certificate.
void parse_verification_material(const json& material, bool keyless, ModelBundle& bundle) {
  only_members(material, {"publicKey", "x509CertificateChain", "certificate", "tlogEntries", "timestampVerificationData"},
               "the bundle's verificationMaterial");
  const size_t signers = material.count("publicKey") + material.count("x509CertificateChain") + material.count("certificate");
  if (signers > 1) {
    throw_signature_invalid("the bundle's verificationMaterial has more than one of publicKey, x509CertificateChain "
                            "and certificate");
  }
  if (const json* data = signed_json::optional_member(material, "timestampVerificationData")) check_timestamp_data(*data);
  if (const auto tlog = material.find("tlogEntries"); tlog != material.end() && !(tlog->is_array() && tlog->empty())) {
    if (!keyless) {
      throw_signature_invalid("the bundle has transparency-log entries (Sigstore keyless signing)", {},
                              "verify it with --trust-root trusted_root.json --identity ID --issuer URL");
    }
    if (!tlog->is_array()) throw_signature_invalid("the bundle's tlogEntries is not a list");
    bundle.tlog_entries_json = tlog->dump();
  }
  if (const auto key = material.find("publicKey"); key != material.end()) {
    bundle.has_public_key = true;
    only_members(*key, {"hint"}, "the bundle's publicKey");
    if (const auto hint = key->find("hint"); hint != key->end() && !hint->is_null()) {
      if (!hint->is_string()) throw_signature_invalid("the bundle's key hint is not a string");
      bundle.key_hint = hint->get<std::string>();
    }
  }
  if (const auto chain = material.find("x509CertificateChain"); chain != material.end()) {
    only_members(*chain, {"certificates"}, "the bundle's x509CertificateChain");
    const json& certs = member(*chain, "certificates", "the bundle's certificate chain");
    if (!certs.is_array() || certs.empty()) throw_signature_invalid("the bundle's certificate chain is empty");
    // A signer's chain is a leaf and a few CAs; each certificate costs a parse and a place in the chain search.
    constexpr size_t kMaxChain = 32;
    if (certs.size() > kMaxChain) {
      throw_signature_invalid("the bundle's certificate chain has " + std::to_string(certs.size()) +
                              " certificates, more than any signer's (at most " + std::to_string(kMaxChain) + ")");
    }
    for (const json& cert : certs) {
      only_members(cert, {"rawBytes"}, "a certificate of the chain");
      bundle.certificates.push_back(base64_member(cert, "rawBytes", "a certificate"));
    }
  }
  if (const auto cert = material.find("certificate"); cert != material.end()) {
    only_members(*cert, {"rawBytes"}, "the bundle's certificate");
    if (keyless) bundle.certificates.push_back(base64_member(*cert, "rawBytes", "the bundle's certificate"));
  }
  if (bundle.has_public_key == !bundle.certificates.empty()) {
    throw_signature_invalid(bundle.has_public_key ? "the bundle has both a public key and certificates"
                                                  : "the bundle has neither a public key nor certificates");
  }
}

}  // namespace

ModelBundle parse_bundle(std::string_view text, bool allow_keyless) {
  std::string problem;
  // The bundle is a few dozen values (the statement is one base64 string): a flood of them is not one.
  const std::optional<json> doc = parse_bounded_json(text, &problem, 64, kMaxBundleBytes, 1u << 16);
  if (!doc) throw_signature_invalid("the signature is not a Sigstore bundle: " + problem);
  only_members(*doc, {"mediaType", "verificationMaterial", "dsseEnvelope", "messageSignature"}, "the bundle");
  if (doc->contains("messageSignature")) {
    throw_signature_invalid("the bundle holds a messageSignature (a signature over a digest), not a DSSE envelope: "
                            "not a model signature");
  }
  ModelBundle bundle;
  bundle.media_type = string_member(*doc, "mediaType", "the bundle");
  if (bundle.media_type != kBundleMediaType && !(allow_keyless && keyless_media_type(bundle.media_type))) {
    throw_signature_invalid("the bundle's media type is '" + bundle.media_type.substr(0, 80) + "', not " +
                            std::string(kBundleMediaType));
  }
  parse_verification_material(member(*doc, "verificationMaterial", "the bundle"), allow_keyless, bundle);
  const json& envelope = member(*doc, "dsseEnvelope", "the bundle");
  only_members(envelope, {"payload", "payloadType", "signatures"}, "the DSSE envelope");
  bundle.payload_type = string_member(envelope, "payloadType", "the DSSE envelope");
  if (bundle.payload_type != kInTotoPayloadType) {
    throw_signature_invalid("the DSSE payload type is '" + bundle.payload_type.substr(0, 80) + "', not " +
                            std::string(kInTotoPayloadType));
  }
  bundle.payload = base64_member(envelope, "payload", "the DSSE envelope");
  const json& signatures = member(envelope, "signatures", "the DSSE envelope");
  if (!signatures.is_array() || signatures.size() != 1) {
    throw_signature_invalid("the DSSE envelope has " +
                            (signatures.is_array() ? std::to_string(signatures.size()) : std::string("no list of")) +
                            " signatures, not one");
  }
  only_members(signatures.front(), {"sig", "keyid"}, "the DSSE signature");
  bundle.signature = base64_member(signatures.front(), "sig", "the DSSE signature");
  return bundle;
}

ModelStatement parse_statement(std::string_view payload) {
  std::string problem;
  const std::optional<json> doc = parse_bounded_json(payload, &problem, 64, kMaxBundleBytes, kMaxStatementValues);
  // Valid JSON over the limits is not "not JSON" (review 57b, F5).
  if (!doc && problem == kNotValidJson) throw_signature_invalid("the signed statement is not JSON: " + problem);
  if (!doc) throw_signature_invalid("the signed statement is more than verify reads: " + problem);
  if (const std::string type = string_member(*doc, "_type", "the statement"); type != kStatementType) {
    throw_signature_invalid("the statement's type is '" + type.substr(0, 80) + "', not " + std::string(kStatementType));
  }
  ModelStatement statement;
  statement.predicate_type = string_member(*doc, "predicateType", "the statement");
  const json& subjects = member(*doc, "subject", "the statement");
  if (!subjects.is_array()) throw_signature_invalid("the statement's subject is not a list");
  if (statement.predicate_type == kPredicateV01) {
    // model_signing 0.2: the files are the subjects; there is no root and no name.
    for (const json& subject : subjects) {
      statement.files.push_back(SignedFile{string_member(subject, "name", "a subject"),
                                           string_member(member(subject, "digest", "a subject"), "sha256", "a digest")});
    }
    statement.ignore_paths = kGitPaths;
    check_files(statement.files);
    return statement;
  }
  if (statement.predicate_type != kPredicateV1) {
    throw_signature_invalid("the statement's predicate type is '" + statement.predicate_type.substr(0, 80) + "', not " +
                            std::string(kPredicateV1));
  }
  if (subjects.size() != 1) throw_signature_invalid("the statement has " + std::to_string(subjects.size()) + " subjects, not one");
  statement.model_name = string_member(subjects.front(), "name", "the subject");
  statement.root_sha256 = string_member(member(subjects.front(), "digest", "the subject"), "sha256", "the subject's digest");
  const json& predicate = member(*doc, "predicate", "the statement");
  const json& serialization = member(predicate, "serialization", "the predicate");
  if (const std::string method = string_member(serialization, "method", "the serialization"); method != "files") {
    throw_signature_invalid("the model was signed with the '" + method.substr(0, 40) +
                            "' serialization; only 'files' is supported (re-sign without shards)");
  }
  if (const std::string hash = string_member(serialization, "hash_type", "the serialization"); hash != "sha256") {
    throw_signature_invalid("the model's files were hashed with '" + hash.substr(0, 40) + "'; only sha256 is supported");
  }
  if (const auto symlinks = serialization.find("allow_symlinks"); symlinks != serialization.end()) {
    statement.allow_symlinks = symlinks->is_boolean() && symlinks->get<bool>();
  }
  if (const auto ignore = serialization.find("ignore_paths"); ignore != serialization.end()) {
    if (!ignore->is_array()) throw_signature_invalid("the serialization's ignore_paths is not a list");
    for (const json& path : *ignore) {
      if (!path.is_string()) throw_signature_invalid("an ignore path is not a string");
      statement.ignore_paths.push_back(path.get<std::string>());
    }
  }
  const json& resources = member(predicate, "resources", "the predicate");
  if (!resources.is_array()) throw_signature_invalid("the predicate's resources are not a list");
  for (const json& resource : resources) statement.files.push_back(parse_resource(resource));
  check_files(statement.files);
  if (statement.root_sha256 != files_root_digest(statement.files)) {
    throw_signature_invalid("the statement's root digest does not match its files' digests");
  }
  return statement;
}

}  // namespace tsarchive
