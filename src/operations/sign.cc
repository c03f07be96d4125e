#include "operations/sign.h"

#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/strings.h"
#include "core/edit/file_edit.h"
#include "core/edit/output_paths.h"
#include "core/provenance/signing_embedded.h"
#include "format/archive.h"
#include "format/byte_source.h"
#include "format/pickle_scan.h"
#include "format/zip.h"
#include "operations/verify.h"

namespace tsarchive {
namespace {

// Why verify's checks (without a key or a load) fail on a model file, as the
// error sign refuses it with; nothing when they pass, or it fails only because
// this build's libtorch cannot read its version (the file is whole; a newer
// PyTorch reads it). A signature vouches for the bytes it covers: a file that
// is damaged, crafted, unsafe to load or changed since its stamp is not signed
// unless allow_unverified.
// What to do about a file sign will not vouch for.
std::string unverified_hint(const std::string& path) {
  return "see: tsarchive verify " + shell_quoted(path) + "; to sign it as it is, give --allow-unverified";
}

std::optional<Error> verify_refusal(const VerifyResult& r, const std::string& path) {
  const std::string hint = unverified_hint(path);
  const auto refused = [&](ErrorKind kind, const std::string& why) {
    return Error(kind, "will not sign it: " + why, path, hint);
  };
  if (r.unsafe) return refused(ErrorKind::UnsafeToLoad, "it is unsafe to load: " + r.safety.worst_line());
  if (!r.report) {
    if (!r.problems.empty()) return refused(ErrorKind::BadInput, "it is damaged: " + r.problems.front());
    return std::nullopt;
  }
  const VerifyReport& report = *r.report;
  switch (report.outcome()) {
    case VerifyOutcome::Intact:
    case VerifyOutcome::Unreadable: return std::nullopt;
    case VerifyOutcome::Malformed: return refused(ErrorKind::BadInput, "it is damaged: " + report.problems.front());
    case VerifyOutcome::Mismatch: break;
  }
  const StampCheck& stamp = *report.stamp;
  if (!stamp.problem.empty()) return refused(ErrorKind::CheckFailed, "its stamp does not read: " + stamp.problem);
  const std::string first = !stamp.changed.empty() ? "'" + stamp.changed.front() + "' changed"
                            : !stamp.missing.empty() ? "'" + stamp.missing.front() + "' missing"
                            : !stamp.added.empty()   ? "'" + stamp.added.front() + "' added"
                                                     : "its digests' root differs";
  return refused(ErrorKind::CheckFailed, "it changed since it was stamped: " + first);
}

// A ZIP whose structure every reader reads alike, though PyTorch did not write it.
bool zip_reads_alike(const ByteSource& source) {
  try {
    read_zip_layout(source);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Whether verify's checks have anything to say of `source`, of `kind`:
// files that are no model by their first bytes (an ONNX model, a config,
// safetensors) are signed as bytes.
bool is_model_to_check(const ByteSource& source, FileKind kind) {
  return !(kind == FileKind::Onnx || (kind == FileKind::NotAModel && !looks_like_pickle(source)));
}
bool is_model_to_check(const ByteSource& source) { return is_model_to_check(source, detect_file_kind(source)); }

// Refuses (throws) a model file `file` (at `path`) that verify's checks fail
// on. Files that are no model (is_model_to_check) and ZIPs PyTorch did not
// write are signed as bytes.
void check_before_signing(const SignSettings& s, const ArchiveFile& file, const std::string& path,
                          const NoteSink& notes) {
  if (s.allow_unverified) return;
  const auto source = file.source();
  const FileKind kind = detect_file_kind(*source);
  if (!is_model_to_check(*source, kind)) return;
  VerifySettings v;
  v.model = path;
  v.threads = s.threads;
  VerifyResult result;
  try {
    result = verify_opened(v, file, notes);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    if (kind == FileKind::OtherZip && zip_reads_alike(*source)) return;
    throw Error(ErrorKind::BadInput, std::string("will not sign it: ") + e.what(), path,
                unverified_hint(path));
  }
  if (std::optional<Error> refusal = verify_refusal(result, path)) throw *refusal;
}

// A directory's file as its hash reads it (`opened`, the inode `identity`),
// checked as one file is, beside the hash: the checks open the file again by
// its path, and refuse an inode other than the one hashed (a file the
// folder's owner swapped in meanwhile), so the digest signed is always that
// of the bytes checked. Notes go out one at a time (files hash in parallel).
void check_directory_file(const SignSettings& s, const std::string& path, const ByteSource& opened,
                          std::pair<uint64_t, uint64_t> identity, const NoteSink& notes) {
  if (!is_model_to_check(opened)) return;
  const ArchiveFile file(path, FileAccess::Read, s.lock_timeout);
  if (file.identity() != identity) {
    throw Error(ErrorKind::CheckFailed, "will not sign it: it was replaced while the folder was being signed", path,
                "sign again when nothing writes into " + shell_quoted(s.model));
  }
  // One thread for its checks: the folder's files already hash in parallel.
  SignSettings one_thread = s;
  one_thread.threads = 1;
  check_before_signing(one_thread, file, path, notes);
}

// The signature goes into the archive (replaced, or `output` written).
SignOutcome sign_embedded(const SignSettings& s, const NoteSink& notes) {
  if (is_directory(s.model)) {
    throw_usage("--embed stores the signature in an archive, and " + s.model + " is a directory",
                "sign a directory without --embed (its signature is MODEL/model.sig)");
  }
  if (!s.ignore_paths.empty()) throw_usage("--ignore-paths is for directories: --embed signs every record");
  if (is_standard_stream(s.output) || is_standard_stream(s.model)) {
    throw_usage("sign --embed writes an archive file, not standard input or output", "give file names");
  }
  check_output_paths({{"-o", s.output}}, {{"the model", s.model}, {"--key", s.key}});
  const SignerKeys keys = read_signer_keys(s.key, s.password_file, s.certificate, s.chain);
  ArchiveFile file(s.model, s.output.empty() ? FileAccess::Edit : FileAccess::Read, s.lock_timeout);
  for (const std::string& note : file.notes()) notes(note);
  check_before_signing(s, file, s.model, notes);
  const auto archive = open_torchscript_archive(file.source(), "cannot embed a signature in this file", true);
  const EmbedResult embedded = embed_signature(file, *archive, keys, s.output, s.threads);
  for (const std::string& note : embedded.written.notes) notes(note);
  SignOutcome out;
  out.signed_model = embedded.signed_records;
  out.written = s.output.empty() ? s.model : s.output;
  out.embedded = true;
  out.replaced_previous = embedded.replaced_previous;
  return out;
}

// A detached signature, written atomically beside the model or to `output`.
// One file is checked and hashed from one open descriptor: the bytes signed
// are the bytes checked.
SignOutcome sign_detached(const SignSettings& s, const NoteSink& notes) {
  const std::string output = s.output.empty() ? default_signature_path(s.model) : s.output;
  if (is_standard_stream(output)) throw_usage("sign writes its signature to a file, not to standard output");
  SignOutcome out;
  out.model_is_directory = is_directory(s.model);
  std::vector<NamedPath> inputs = {{"--key", s.key}};
  if (!out.model_is_directory) inputs.push_back({"the model", s.model});
  check_output_paths({{"-o", output}}, inputs);

  SignRequest request;
  request.model = s.model;
  request.signature_path = output;
  request.keys = read_signer_keys(s.key, s.password_file, s.certificate, s.chain);
  request.files.ignore_paths = ignore_paths_in_model(s.model, s.ignore_paths);
  request.files.ignore_git_paths = s.ignore_git_paths;
  request.files.allow_symlinks = s.allow_symlinks;
  request.files.threads = s.threads;
  if (out.model_is_directory) {
    std::mutex notes_mutex;
    const NoteSink one_at_a_time = [&](const std::string& note) {
      const std::lock_guard<std::mutex> lock(notes_mutex);
      notes(note);
    };
    if (!s.allow_unverified) {
      request.files.check_opened = [&](const std::string& path, const ByteSource& opened,
                                       std::pair<uint64_t, uint64_t> identity) {
        check_directory_file(s, path, opened, identity, one_at_a_time);
      };
    }
    out.signed_model = sign_model(request);
  } else {
    // The checks and the hash read the same descriptor side by side, as
    // verify's do: with a core to spare, about one pass. Nothing is written
    // unless both pass.
    const ArchiveFile file(s.model, FileAccess::Read, s.lock_timeout);
    for (const std::string& note : file.notes()) notes(note);
    // The lock keeps tsarchive's own editors out, not a program that writes
    // the file in place: the checks and the hash read it at different
    // moments, so its state before and after says they read one version.
    const WatchedFile watched = file.watched_settled(ErrorKind::CheckFailed);
    const std::unique_ptr<ByteSource> opened = file.source();
    request.files.opened = opened.get();
    std::future<void> checked =
        std::async(std::launch::async, [&] { check_before_signing(s, file, s.model, notes); });
    SignResult signed_model;
    try {
      signed_model = sign_model(request);
    } catch (...) {
      checked.wait();
      throw;
    }
    checked.get();  // the refusal, when the file is not one to vouch for
    if (!watched.unchanged()) {
      throw Error(ErrorKind::CheckFailed, "will not sign it: it was written while it was being checked and hashed",
                  s.model, "sign again when nothing writes it");
    }
    out.signed_model = std::move(signed_model);
  }
  write_file_atomically(output, out.signed_model.bundle);
  out.written = output;
  out.signature_inside_model = out.model_is_directory && path_inside_model(s.model, output).has_value();
  return out;
}

}  // namespace

SignOutcome sign_model_as_asked(const SignSettings& settings, const NoteSink& notes) {
  if (!settings.chain.empty() && settings.certificate.empty()) {
    throw_usage("--certificate-chain needs --certificate (the signing certificate, issued for --key)");
  }
  return settings.embed ? sign_embedded(settings, notes) : sign_detached(settings, notes);
}

}  // namespace tsarchive
