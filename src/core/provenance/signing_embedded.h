// A signature stored inside the archive it signs: `tsarchive sign MODEL --embed`.
//
// The bundle is model_signing's v1.0 format (model_signature.h), kept as the
// extra file extra/tsarchive/model.sig, so PyTorch loads the archive as before
// (torch.jit.load reads extra/ files only when asked by name, and
// torch.export.load reads them as text; the bundle is JSON). Its statement
// treats the archive as a folder of records: one resource per record but the
// signature itself, named by its path under the archive's top folder
// ("data.pkl", "data/0", "extra/producer_info.json") with the SHA-256 of its
// uncompressed bytes (digest.h, as the stamp digests records), the subject
// named after the top folder, and "extra/tsarchive/model.sig" in the
// serialization's ignore_paths. So the statement is exactly what
// model_signing would sign over the archive's records unzipped into a folder.
//
// A check passes only when the statement lists exactly the archive's other
// records with their digests: a record changed, added, removed or renamed
// since signing is named (SignatureCheck::changed/missing/added).
//
// The stamp (producer_info.h) leaves the signature out of its digests, and the
// signature covers the stamp: stamping first and signing second (stamp
// --sign-key does both in one write) leaves both valid.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/provenance/digest.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/provenance/signing.h"

namespace tsarchive {

inline constexpr const char* kEmbeddedSignatureName = "tsarchive/model.sig";  // under extra/
inline constexpr const char* kEmbeddedSignatureRecord = "extra/tsarchive/model.sig";

// The archive's embedded signature record, or nullptr.
const Record* find_embedded_signature(const TorchArchive& archive);

// Signs the records an archive will hold once `edits` (extra/ edits, applied
// in order) are planned over it: `records` (digest_records of the archive as
// it is; a damaged one is Error(BadInput) naming `file`) with the edited
// values in place of theirs, the signature left out. Returns the signature
// and the edit that stores it, to plan together with `edits` (one write).
struct EmbeddedSignature {
  SignResult signed_records;
  ExtraEdit edit;
};
EmbeddedSignature sign_archive_records(const std::vector<RecordDigest>& records, const std::vector<ExtraEdit>& edits,
                                       const std::string& top_folder, const SignerKeys& keys, const std::string& file);

// `sign --embed`: digests every record of `archive` (opened from `file`,
// locked for the edit), signs them, and writes the archive with the signature
// stored (replacing a previous one) and every other record's bytes kept:
// `file` atomically replaced, or `output` written when not empty.
struct EmbedResult {
  SignResult signed_records;
  WriteResult written;
  bool replaced_previous = false;
};
EmbedResult embed_signature(ArchiveFile& file, const TorchArchive& archive, const SignerKeys& keys,
                            const std::string& output, unsigned threads);

// Checks an embedded signature's bundle against `trust`
// (check_signature_bundle) and that its statement is of records: it leaves out
// "extra/tsarchive/model.sig" (Error(SignatureInvalid) naming `file` if not,
// as for a file's signature). The records are not read.
SignatureCheck check_embedded_bundle(const std::string& bundle_text, const SignatureTrust& trust, const std::string& file);

// Compares the statement of `check` with `records` (digest_records of the
// archive: a damaged record is Error(BadInput) naming it and `file`). Every
// difference is named in check.changed, missing and added, not thrown.
void match_embedded_records(SignatureCheck& check, const std::vector<RecordDigest>& records, const std::string& file);

// What inspect shows of an embedded signature, unverified: who it names as
// signer and how many records it lists, or why it cannot be read.
struct EmbeddedSignatureInfo {
  std::string record = kEmbeddedSignatureRecord;
  std::string method;           // "key" or "certificate"; empty when unreadable
  std::string key_sha256;       // the key method's hint (the signer's key fingerprint)
  std::string subject, issuer;  // the certificate method's signing certificate
  size_t records = 0;           // listed in the statement
  std::string problem;          // why it could not be read
};
std::optional<EmbeddedSignatureInfo> describe_embedded_signature(const TorchArchive& archive);

// The one line an edit prints when the archive carries an embedded signature
// that the edit's result no longer matches (`what` changed, e.g. "the stamp
// changed"), or empty when it carries none. The record is carried as it is.
std::string stale_signature_note(const TorchArchive& archive, const std::string& result, const std::string& what);

}  // namespace tsarchive
