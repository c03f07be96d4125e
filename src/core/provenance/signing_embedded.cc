#include "core/provenance/signing_embedded.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "core/provenance/model_signature.h"
#include "core/provenance/signing_crypto.h"

namespace tsarchive {
namespace {

// (name, sha256) of every record but the embedded signature; a damaged record
// is Error(BadInput): a signature over damage would bless it.
std::map<std::string, std::string> record_digests(const std::vector<RecordDigest>& records, const std::string& file,
                                                  const char* consequence) {
  std::map<std::string, std::string> out;
  for (const RecordDigest& d : records) {
    if (d.name == kEmbeddedSignatureRecord) continue;
    if (!d.problem.empty()) throw_bad_input("record '" + d.name + "' is damaged: " + d.problem, file, consequence);
    out[d.name] = d.sha256;
  }
  return out;
}

}  // namespace

const Record* find_embedded_signature(const TorchArchive& archive) { return archive.find(kEmbeddedSignatureRecord); }

EmbeddedSignature sign_archive_records(const std::vector<RecordDigest>& records, const std::vector<ExtraEdit>& edits,
                                       const std::string& top_folder, const SignerKeys& keys, const std::string& file) {
  std::map<std::string, std::string> digests = record_digests(records, file, "nothing was signed");
  for (const ExtraEdit& e : edits) {
    const std::string name = extra_record_name(e.name);
    if (e.value) {
      digests[name] = sha256_hex(*e.value);
    } else {
      digests.erase(name);
    }
  }
  digests.erase(kEmbeddedSignatureRecord);
  ModelStatement statement;
  statement.model_name = top_folder;
  statement.ignore_paths = {kEmbeddedSignatureRecord};
  for (const auto& [name, sha256] : digests) {
    if (const std::string why = signed_name_problem(name); !why.empty()) {
      throw_bad_input("record '" + name + "' cannot be named in a signature: " + why, file, "nothing was signed");
    }
    statement.files.push_back(SignedFile{name, sha256});
  }
  sort_signed_files(statement.files);
  EmbeddedSignature out;
  out.signed_records = sign_statement(std::move(statement), keys);
  out.edit = ExtraEdit{kEmbeddedSignatureName, out.signed_records.bundle};
  return out;
}

EmbedResult embed_signature(ArchiveFile& file, const TorchArchive& archive, const SignerKeys& keys,
                            const std::string& output, unsigned threads) {
  // The key first: a wrong key or password fails before the archive is read.
  (void)PrivateKey::from_pem(keys.private_key_pem, keys.private_key_file, keys.password);
  DigestOptions options;
  options.threads = threads;
  const std::vector<RecordDigest> records = digest_records(archive, options);
  EmbeddedSignature signature = sign_archive_records(records, {}, archive.top_folder(), keys, file.path());
  const ExtraEditPlan plan = plan_extra_edits(archive, {signature.edit}, false);
  EmbedResult out;
  out.replaced_previous = find_embedded_signature(archive) != nullptr;
  out.signed_records = std::move(signature.signed_records);
  out.written = output.empty() ? file.replace(plan.zip) : file.write_new(plan.zip, output);
  return out;
}

SignatureCheck check_embedded_bundle(const std::string& bundle_text, const SignatureTrust& trust, const std::string& file) {
  const std::string where = file + ", " + kEmbeddedSignatureRecord;
  SignatureCheck check = check_signature_bundle(where, bundle_text, trust);
  check.embedded = true;
  check.signature_path = kEmbeddedSignatureRecord;
  const std::vector<std::string>& ignored = check.statement.ignore_paths;
  if (std::find(ignored.begin(), ignored.end(), kEmbeddedSignatureRecord) == ignored.end()) {
    throw_signature_invalid("the embedded signature is not of the archive's records (its statement does not leave out " +
                                std::string(kEmbeddedSignatureRecord) + ")",
                            where, "this is another model's signature; sign this archive with 'tsarchive sign --embed'");
  }
  return check;
}

void match_embedded_records(SignatureCheck& check, const std::vector<RecordDigest>& records, const std::string& file) {
  std::map<std::string, std::string> have = record_digests(records, file, "the signature was not checked");
  for (const SignedFile& f : check.statement.files) {
    const auto it = have.find(f.name);
    if (it == have.end()) {
      check.missing.push_back(f.name);
      continue;
    }
    if (it->second != f.sha256) check.changed.push_back(f.name);
    have.erase(it);
  }
  for (const auto& [name, digest] : have) check.added.push_back(name);
}

std::optional<EmbeddedSignatureInfo> describe_embedded_signature(const TorchArchive& archive) {
  const Record* record = find_embedded_signature(archive);
  if (record == nullptr) return std::nullopt;
  EmbeddedSignatureInfo info;
  try {
    const ModelBundle bundle = parse_bundle(archive.read(*record, kMaxBundleBytes));
    info.records = parse_statement(bundle.payload).files.size();
    if (bundle.has_public_key) {
      info.method = "key";
      info.key_sha256 = bundle.key_hint;
    } else {
      const Certificate leaf = Certificate::from_der(bundle.certificates.front());
      info.method = "certificate";
      info.subject = leaf.subject();
      info.issuer = leaf.issuer();
    }
  } catch (const Error& e) {
    info = EmbeddedSignatureInfo{};
    info.problem = e.what();
  }
  return info;
}

std::string stale_signature_note(const TorchArchive& archive, const std::string& result, const std::string& what) {
  if (find_embedded_signature(archive) == nullptr) return {};
  return "the embedded signature (" + std::string(kEmbeddedSignatureRecord) + ") no longer covers " + result + " (" +
         what + "); it is carried as it is, and 'verify --key' fails (exit 7) until it is signed again: tsarchive sign " +
         result + " --key KEY --embed";
}

}  // namespace tsarchive
