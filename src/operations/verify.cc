#include "operations/verify.h"

#include <sys/stat.h>

#include <future>
#include <memory>
#include <optional>

#include "base/posix_fd.h"
#include "base/strings.h"
#include "contract/torch_backend.h"
#include "core/edit/file_edit.h"
#include "core/inspect/inspect.h"
#include "core/provenance/digest.h"
#include "core/provenance/checked_archive.h"
#include "core/provenance/signing_crypto.h"
#include "core/provenance/signing_embedded.h"
#include "format/zip.h"
#include "worker/worker.h"

namespace tsarchive {
namespace {

// Whether the opened file starts as a ZIP archive does (a local file header).
bool looks_like_zip(const ArchiveFile& file) {
  const std::unique_ptr<ByteSource> source = file.source();
  if (source->size() < 4) return false;
  return source->read_string(0, 4) == std::string_view("PK\x03\x04", 4);
}

bool signature_asked(const VerifySettings& s) { return s.trusts_a_signer(); }

// Whether the ZIP's entries name an embedded signature (under any top folder).
bool names_embedded_signature(const ArchiveFile& file) {
  try {
    const std::string suffix = "/" + std::string(kEmbeddedSignatureRecord);
    for (const std::string& name : read_zip_entry_names(*file.source())) {
      if (ends_with(name, suffix)) return true;
    }
  } catch (const Error&) {
    // Not even its entries can be listed: nothing to say of a signature in it.
  }
  return false;
}

struct EmbeddedBundle {
  std::optional<std::string> bundle;
  // Why verify's checks refuse the archive (a duplicate entry, a local name
  // that is not the central one), so that no embedded signature can be read.
  std::string refused;
  // And its entries name one: that refusal is verify's answer, not "not signed".
  bool names_signature = false;
};

// The archive's embedded signature, when the opened file is an archive that
// has one: only the kinds verify_archive_file checks (the records are compared
// there; a record planted in a torch.save file is not a signature). Read from
// the opened file, so the records checked and the signature are of one file.
EmbeddedBundle embedded_bundle(const ArchiveFile* file) {
  // Only a file verify reads as an archive (it starts with a ZIP record): the
  // statement is compared with the records those checks read. A ZIP behind
  // other bytes is no archive to verify, and its signature no signature of it.
  EmbeddedBundle out;
  if (file == nullptr || is_standard_stream(file->path()) || !looks_like_zip(*file)) return out;
  try {
    const TorchArchive archive(file->source());
    const FileKind kind = archive.kind();
    if (kind != FileKind::TorchScript && kind != FileKind::LiteInterpreter && kind != FileKind::ExportedProgram) {
      return out;
    }
    if (const Record* record = find_embedded_signature(archive)) out.bundle = archive.read(*record, kMaxBundleBytes);
  } catch (const Error& e) {
    // Not an archive verify reads: its own checks say why; a detached signature may still apply.
    if (e.kind() == ErrorKind::BadInput) {
      out.refused = e.what();
      out.names_signature = names_embedded_signature(*file);
    }
  }
  return out;
}

// --load-library names the libraries of the custom operators and classes the
// model uses: the verdict takes them as the user's.
LoadSafetyOptions safety_options(const VerifySettings& s) {
  LoadSafetyOptions o = s.load_safety;
  o.operator_libraries = !s.worker.libraries.empty();
  return o;
}

SignatureTrust read_trust(const VerifySettings& s) {
  SignatureTrust trust;
  if (!s.key.empty()) {
    trust.public_key_file = s.key;
    trust.public_key_pem = read_signing_file(s.key, "the public key");
  }
  for (const std::string& root : s.roots) {
    trust.root_files.push_back(root);
    trust.root_pems.push_back(read_signing_file(root, "the certificate roots"));
  }
  if (!s.trust_root.empty()) {
    trust.trust_root_file = s.trust_root;
    trust.trust_root_json = read_signing_file(s.trust_root, "the Sigstore trust root");
    trust.identity = s.identity;
    trust.oidc_issuer = s.issuer;
  }
  return trust;
}

// --signature first, then the archive's own (from `file`, when it is open),
// then MODEL.sig beside it. A model file is hashed from `file` when it is open:
// the bytes the signature covers are the bytes verify checks.
SignatureOutcome check_signature(const VerifySettings& s, const ArchiveFile* file) {
  SignatureOutcome out;
  out.asked = signature_asked(s);
  if (!out.asked) return out;
  // The trust given is read and parsed first: a mistyped --key or a file that
  // is no key is an error even when the model turns out to carry no signature.
  const SignatureTrust trust = read_trust(s);
  if (!s.key.empty()) PublicKey::from_pem(trust.public_key_pem, s.key);
  for (size_t i = 0; i < trust.root_pems.size(); ++i) certificates_from_pem(trust.root_pems[i], trust.root_files[i]);
  std::string refused;  // why no embedded signature could be read from an archive verify refuses
  if (s.signature.empty()) {
    EmbeddedBundle embedded = embedded_bundle(file);
    if (embedded.bundle) {
      out.check = check_embedded_bundle(*embedded.bundle, trust, s.model);
      out.records_pending = true;
      return out;
    }
    if (embedded.names_signature) out.embedded_refused = embedded.refused;
    refused = std::move(embedded.refused);
  }
  const std::string path = s.signature.empty() ? default_signature_path(s.model) : s.signature;
  if (s.signature.empty() && !exists(path)) {
    out.looked_for = path;
    // The archive's refusal comes first, as without a key (signature_verdict otherwise).
    if (!out.embedded_refused.empty()) return out;
    if (!s.allow_unsigned) {
      throw_signature_invalid("the model is not signed: no " + path + " and no embedded " + kEmbeddedSignatureRecord +
                                  (refused.empty() ? std::string() : " verify can read (" + refused + ")"),
                              s.model, "sign it with 'tsarchive sign', or give its signature with --signature SIG");
    }
    return out;
  }
  const std::string bundle = read_signing_file(path, "the signature");
  ModelFilesOptions files;
  // As sign takes them: from here when inside the model, else relative to it.
  if (!s.ignore_paths.empty() && is_directory(s.model)) files.ignore_paths = ignore_paths_in_model(s.model, s.ignore_paths);
  files.threads = s.threads;
  const std::unique_ptr<ByteSource> opened = file != nullptr ? file->source() : nullptr;
  files.opened = opened.get();
  out.check = check_model_signature(s.model, path, bundle, trust, files);
  return out;
}

// The signature's verdict once the file was read without a structural
// refusal: an embedded signature that could not be read, with no other
// signature found, is still no signature (exit 7).
SignatureOutcome signature_verdict(std::future<SignatureOutcome>& pending, const std::string& model) {
  SignatureOutcome out = pending.get();
  if (!out.check && !out.embedded_refused.empty()) {
    throw_signature_invalid("the model carries an embedded signature (" + std::string(kEmbeddedSignatureRecord) +
                                ") that cannot be checked: " + out.embedded_refused,
                            model, "do not deploy it; fetch the signed model again");
  }
  return out;
}

// One line naming the first difference and how many more.
std::string differences(const SignatureCheck& c) {
  std::string first;
  if (c.changed.size() == 1 && c.changed.front() == ".") return "its SHA-256 is not the one signed (the file changed)";
  // A link or a pipe where a file was signed, or beside them: what it is, since a signature never lists one.
  const auto no_file = [&](const std::string& name) {
    const auto it = c.not_files.find(name);
    return it == c.not_files.end() ? std::string() : it->second;
  };
  if (!c.changed.empty()) {
    const std::string now = no_file(c.changed.front());
    first = "'" + c.changed.front() + "' changed" + (now.empty() ? "" : " (now " + now + ")");
  } else if (!c.missing.empty()) {
    first = "'" + c.missing.front() + "' missing";
  } else {
    const std::string now = no_file(c.added.front());
    first = "'" + c.added.front() + "' added (" + (now.empty() ? "" : now + ", ") + "not signed)";
  }
  const size_t more = c.changed.size() + c.missing.size() + c.added.size() - 1;
  return first + (more > 0 ? " and " + std::to_string(more) + " more" : std::string());
}

Error signed_model_differs(const char* what, const SignatureCheck& check, const std::string& model) {
  return Error(ErrorKind::CheckFailed, std::string(what) + " differs from what was signed: " + differences(check), model,
               "do not deploy it; fetch the signed model again");
}

// A directory (`file` null), or a file that is neither an archive nor a pickle: the signature is
// the whole check.
VerifyResult verify_signature_only(const VerifySettings& s, const ArchiveFile* file) {
  if (!signature_asked(s)) {
    throw Error(ErrorKind::Usage,
                is_directory(s.model) ? "a directory is verified by its signature" : "not a ZIP archive", s.model,
                "give --key PUBLIC.pem or --certificate-chain ROOTS.pem to check its signature");
  }
  VerifyResult result;
  result.by = VerifiedBy::Signature;
  result.model = s.model;
  result.signature = check_signature(s, file);
  if (!result.signature.check) {
    throw_signature_invalid("the model is not signed: no " + result.signature.looked_for, s.model,
                            "give its signature with --signature SIG");
  }
  if (!result.signature.check->matches()) {
    result.findings.push_back(signed_model_differs("the model", *result.signature.check, s.model));
    result.exit_code = verify_exit_code(VerifyOutcome::Mismatch);
    return result;
  }
  return result;
}

// A legacy or tar torch.save file, or a plain pickle: judged by what loading it
// would run and by its damage, signed or not.
bool is_pickle_file(FileKind kind, const ByteSource& source) {
  return kind == FileKind::LegacyTorchSave || kind == FileKind::LegacyTar ||
         (kind == FileKind::NotAModel && looks_like_pickle(source));
}

// The damage a ZIP's records show (CRC-32, declared sizes), read on all cores
// as an archive's are: torch.load checks neither. Only the records: a
// torch.save pickle holds any Python object, so what inspect's tensor walker
// cannot follow in it is no damage.
std::vector<std::string> damaged_records(const TorchArchive& archive, unsigned threads) {
  DigestOptions options;
  options.threads = threads;
  options.sha256 = false;
  std::vector<std::string> problems;
  for (const RecordDigest& d : digest_records(archive, options)) {
    if (!d.problem.empty()) problems.push_back("record '" + d.name + "': " + d.problem);
  }
  return problems;
}

// torch.save files (ZIP, legacy or legacy tar), torch.package archives and plain
// pickles: the load-safety verdict is the check, after a ZIP's structure and
// CRCs. Nothing when the file is an archive that verify's own checks take.
std::optional<VerifyResult> verify_load_safety_only(const VerifySettings& s, const ArchiveFile& file,
                                                    std::future<SignatureOutcome>& pending) {
  if (is_standard_stream(s.model)) return std::nullopt;
  const auto source = file.source();
  VerifyResult result;
  result.by = VerifiedBy::LoadSafety;
  result.model = s.model;
  result.kind = detect_file_kind(*source);
  std::optional<LoadSafety> legacy_export;
  if (result.kind == FileKind::OtherZip) legacy_export = assess_legacy_export_load_safety(*source, safety_options(s));
  if (legacy_export) {
    // torch.export's layout before 2.6, which no other check reads: torch.export.load's verdict is the check.
    result.kind = FileKind::ExportedProgram;
    result.safety = std::move(*legacy_export);
  } else if (result.kind == FileKind::OtherZip) {
    const TorchArchive archive(borrow_source(*source));  // the ZIP checks' refusal stands
    if (archive.kind() != FileKind::TorchSave && archive.kind() != FileKind::TorchPackage) return std::nullopt;
    result.kind = archive.kind();
    // A damaged record is the answer (exit 3), as for an archive: the verdict
    // reads the pickles only once they are whole.
    result.problems = damaged_records(archive, s.threads);
    if (result.problems.empty()) result.safety = assess_archive_load_safety(archive, safety_options(s));
  } else if (is_pickle_file(result.kind, *source)) {
    if (result.kind == FileKind::NotAModel) result.kind = FileKind::Pickle;
    result.safety = assess_load_safety(*source, safety_options(s));
    // A pickle the end of the file cuts short, or a legacy file's storage
    // data: damage (torch.load fails with "unexpected EOF").
    result.problems = result.safety.damage;
    if (result.kind == FileKind::LegacyTorchSave && result.problems.empty()) {
      result.problems = legacy_torch_save_damage(*source);
    }
  } else {
    return std::nullopt;
  }
  result.unsafe = result.safety.unsafe();
  result.signature = signature_verdict(pending, s.model);
  // A damaged file's signature is not compared: the damage is the answer,
  // unless what comes before it is unsafe to load already (exit 8).
  const bool damaged = !result.problems.empty() && !result.unsafe;
  const bool changed = !damaged && result.signature.check && !result.signature.check->matches();
  result.signature_fails = changed;
  if (damaged) {
    result.findings.push_back(Error(ErrorKind::BadInput, "the file is damaged: " + result.problems.front(), s.model,
                                    "do not load it; fetch it again or save it again"));
    result.exit_code = verify_exit_code(VerifyOutcome::Malformed);
    return result;
  }
  if (changed) result.findings.push_back(signed_model_differs("the file", *result.signature.check, s.model));
  if (result.unsafe) {
    result.exit_code = static_cast<int>(ErrorKind::UnsafeToLoad);
  } else if (changed) {
    result.exit_code = verify_exit_code(VerifyOutcome::Mismatch);
  }
  return result;
}

// An embedded signature's records are the ones verify digested (a damaged
// archive's are not compared: the damage is the answer).
void match_embedded(SignatureOutcome& s, const VerifyReport& report, const std::string& model) {
  if (!s.records_pending || report.outcome() == VerifyOutcome::Malformed) return;
  match_embedded_records(*s.check, report.records, model);
  s.records_pending = false;
}

// An embedded signature that does not list exactly the archive's other records.
bool embedded_uncovered(const SignatureOutcome& s) {
  return s.check && s.check->embedded && !s.records_pending && !s.check->matches();
}

// libtorch loads the archive in a worker: only once the core found nothing wrong with it.
bool load_in_worker(const VerifySettings& s, const ArchiveFile& file, const TorchArchive& archive,
                    const VerifyResult& result, const NoteSink& notes) {
  const VerifyOutcome outcome = result.report->outcome();
  if (!s.load || result.unsafe || outcome == VerifyOutcome::Malformed || outcome == VerifyOutcome::Unreadable) {
    return false;
  }
  const CheckedArchive checked = admit_verified(file, archive, *result.report, "nothing was loaded");
  in_worker<std::string>(worker_job(s.worker, checked, "loading the module", notes), [&](TorchBackend& torch) {
    torch.load(checked.libtorch_path(), s.model);
    return std::string();
  });
  return true;
}

// The errors after an archive's report, and its exit status.
void judge_archive(const VerifySettings& s, VerifyResult& result) {
  const VerifyReport& report = *result.report;
  const bool pt2 = report.kind == FileKind::ExportedProgram;
  const auto found = [&](Error error) { result.findings.push_back(std::move(error)); };
  if (report.outcome() == VerifyOutcome::Malformed) {
    found(Error(ErrorKind::BadInput, "the archive is damaged: " + report.problems.front(), s.model,
                "do not deploy it; re-export it or fetch it again"));
  }
  if (report.outcome() == VerifyOutcome::Unreadable) {
    found(Error(ErrorKind::BadInput, report.unreadable.front(), s.model,
                pt2 ? "load it with the PyTorch that wrote it" : newer_libtorch_hint()));
  }
  const SignatureOutcome& signature = result.signature;
  if (embedded_uncovered(signature)) {
    found(Error(ErrorKind::SignatureInvalid,
                "the embedded signature (" + std::string(kEmbeddedSignatureRecord) +
                    ") does not cover the archive: " + differences(*signature.check),
                s.model, "do not deploy it; sign it again, or fetch the signed model again"));
    result.exit_code = static_cast<int>(ErrorKind::SignatureInvalid);
    return;
  }
  const bool signature_changed = signature.check && !signature.check->embedded && !signature.check->matches() &&
                                 report.outcome() != VerifyOutcome::Malformed;
  if (signature_changed) found(signed_model_differs("the archive", *signature.check, s.model));
  if (result.unsafe) {
    result.exit_code = static_cast<int>(ErrorKind::UnsafeToLoad);
  } else if (signature_changed) {
    result.exit_code = verify_exit_code(VerifyOutcome::Mismatch);
  } else if (report.outcome() == VerifyOutcome::Intact && s.require_stamp && !report.stamp) {
    found(Error(ErrorKind::CheckFailed,
                "not stamped by tsarchive" +
                    (report.producer_info ? " (extra/" + std::string(kStampName) + " is the producer's own)"
                                          : std::string()),
                s.model, "stamp it with 'tsarchive stamp', or leave out --require-stamp"));
    result.exit_code = verify_exit_code(VerifyOutcome::Mismatch);
  } else {
    result.exit_code = verify_exit_code(report.outcome());
  }
}

// An archive: the core's checks, and the signature's verdict from `pending`.
VerifyResult verify_archive_file(const VerifySettings& s, const ArchiveFile& file,
                                 std::future<SignatureOutcome>& pending, const NoteSink& notes) {
  const std::unique_ptr<TorchArchive> archive = open_torchscript_archive(
      file.source(), "cannot verify this file", true,
      "give a TorchScript archive, a .pt2, a torch.save file, a torch.package archive or a pickle file");
  if (s.load && archive->kind() == FileKind::ExportedProgram) {
    // A package's compiled code is code: only `run` loads it, on request.
    throw Error(ErrorKind::Usage, "--load does not load a .pt2 (an AOTInductor package's compiled code is code)",
                s.model, "leave out --load; the core's checks need no libtorch");
  }
  VerifyResult result;
  result.model = s.model;
  VerifyOptions options;
  options.threads = s.threads;
  options.readable = built_libtorch_versions();
  options.all_sha256 = s.all_sha256;
  result.report = verify_archive(*archive, options);
  const VerifyReport& report = *result.report;
  result.signature = signature_verdict(pending, s.model);
  match_embedded(result.signature, report, s.model);
  result.signature.embedded_unchecked = !result.signature.asked && find_embedded_signature(*archive) != nullptr;
  // The verdict reads the pickles again: only once verify found them whole
  // (a damaged record is the answer already, named in the report).
  if (report.problems.empty()) result.safety = assess_archive_load_safety(*archive, safety_options(s));
  result.unsafe = result.safety.unsafe() && report.outcome() == VerifyOutcome::Intact;
  result.loaded = load_in_worker(s, file, *archive, result, notes);
  judge_archive(s, result);
  result.signature_fails = embedded_uncovered(result.signature) ||
                           (result.signature.check && !result.signature.check->matches() &&
                            report.outcome() != VerifyOutcome::Malformed);
  return result;
}

}  // namespace

std::optional<std::string> not_a_model_file(const std::string& path) {
  for (const char* extension : {".pt", ".pth", ".bin", ".ckpt", ".pt2", ".ptl", ".pkl", ".pickle"}) {
    if (ends_with(path, extension)) return std::nullopt;
  }
  const std::unique_ptr<ByteSource> source = open_file_source(path);
  switch (detect_file_kind(*source)) {
    case FileKind::Onnx: return "an ONNX model, which verify does not judge ('tsarchive inspect' reads its header)";
    case FileKind::NotAModel:
      if (looks_like_pickle(*source)) return std::nullopt;
      return std::string(source->size() == 0 ? "an empty file" : "not a ZIP, a pickle or a torch.save file") +
             " (not a model file by its first bytes)";
    default: return std::nullopt;
  }
}

VerifyResult verify_model(const VerifySettings& s, const NoteSink& notes) {
  if (is_directory(s.model)) return verify_signature_only(s, nullptr);
  std::unique_ptr<ArchiveFile> file;
  try {
    file = std::make_unique<ArchiveFile>(s.model, s.load ? FileAccess::ReadHeld : FileAccess::Read, s.lock_timeout);
  } catch (...) {
    check_signature(s, nullptr);  // the signature's verdict (exit 7) comes first
    throw;
  }
  for (const std::string& note : file->notes()) notes(note);
  // The checks and the signature's hash read the file at different moments:
  // a verdict is of one version of it, or none (a program rewriting it in
  // place, which no lock stops). Not needed for standard input (a copy of
  // its own) nor with --load (a private copy, or a leased file).
  const bool watch = !is_standard_stream(s.model) && !s.load;
  std::optional<WatchedFile> watched;
  if (watch) watched = file->watched_settled(ErrorKind::CheckFailed);
  VerifyResult result = verify_opened(s, *file, notes);
  if (watched && !watched->unchanged()) {
    throw Error(ErrorKind::CheckFailed, "it was written while it was being verified", s.model,
                "verify it again when nothing writes it");
  }
  return result;
}

VerifyResult verify_opened(const VerifySettings& s, const ArchiveFile& file, const NoteSink& notes) {
  // Which checks apply is decided on the opened file, not on a second open of its path.
  // A signed pickle or legacy torch.save file: who signed it is one question,
  // what loading it would run and whether it is whole others, answered as
  // without a key (a signature vouches for the signer, not for the bytes).
  if (signature_asked(s) && !is_standard_stream(s.model) && !looks_like_zip(file) &&
      !is_pickle_file(detect_file_kind(*file.source()), *file.source())) {
    return verify_signature_only(s, &file);
  }
  // The signature's hash of the whole file and the core's checks of its
  // records read the same bytes: side by side, so that with a core to spare
  // verify costs about one pass, not two. Its verdict (exit 7) comes first,
  // even when the archive cannot be read.
  std::future<SignatureOutcome> pending =
      std::async(std::launch::async, [&s, &file] { return check_signature(s, &file); });
  try {
    if (std::optional<VerifyResult> result = verify_load_safety_only(s, file, pending)) return std::move(*result);
    return verify_archive_file(s, file, pending, notes);
  } catch (const Error& e) {
    SignatureOutcome signature;
    if (pending.valid()) signature = pending.get();  // throws the signature's error, if it has one
    if (e.kind() != ErrorKind::BadInput || is_standard_stream(s.model)) throw;
    // A ZIP the checks refuse for names a loader still reads (or extracts outside
    // its folder) is an attack on that loader, not damage: exit 8, not 3.
    std::optional<RefusedZipVerdict> names = assess_refused_zip_names(*file.source(), safety_options(s));
    if (!names) throw;
    VerifyResult result;
    result.by = VerifiedBy::LoadSafety;
    result.model = s.model;
    result.kind = names->kind;
    result.safety = std::move(names->safety);
    result.unsafe = true;
    result.signature = std::move(signature);
    result.exit_code = static_cast<int>(ErrorKind::UnsafeToLoad);
    return result;
  } catch (...) {
    if (pending.valid()) pending.get();  // throws the signature's error, if it has one
    throw;
  }
}

}  // namespace tsarchive
