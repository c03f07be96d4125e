// tsarchive verify MODEL|DIR... [--json] [--load [--memory-limit SIZE] [--time-limit S]] [--threads N]
//   [--torch-version V] [--allow-global MODULE.NAME]...
//   [--key PUBLIC.pem | --certificate-chain ROOTS.pem... | --trust-root trusted_root.json --identity ID --issuer URL]
//   [--signature SIG] [--require-signature]
//
// With --key, --certificate-chain or --trust-root (Sigstore keyless), the model's signature (core/provenance/signing.h) is
// checked first; a model that is a directory, or a file that is not a ZIP
// archive, is checked by its signature alone. Without them a directory is
// scanned file by file, as a hub scans an upload.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/load_options.h"
#include "cli/many_files.h"
#include "operations/opened_archive.h"
#include "cli/output.h"
#include "cli/report_load_safety.h"
#include "cli/report_verify.h"
#include "base/error.h"
#include "core/edit/file_edit.h"
#include "contract/torch_backend.h"
#include "core/provenance/signing.h"
#include "core/provenance/signing_embedded.h"
#include "core/provenance/verify.h"
#include "cli/worker_options.h"
#include "core/provenance/checked_archive.h"

namespace tsarchive::cli {
namespace {

struct VerifyCliOptions {
  std::vector<std::string> models;
  std::string model;  // the one being verified
  bool json = false;
  bool load = false;
  bool require_stamp = false;
  unsigned threads = 0;
  LoadSafetyOptions load_safety;
  WorkerSettings worker;
  std::string signature;
  std::string key;
  std::vector<std::string> roots;
  std::string trust_root, identity, issuer;  // Sigstore keyless
  std::vector<std::string> ignore_paths;
  bool require_signature = false;
};

// Whether a signer to trust was named: --key, --certificate-chain or --trust-root.
bool trusts_a_signer(const VerifyCliOptions& opts) {
  return !opts.key.empty() || !opts.roots.empty() || !opts.trust_root.empty();
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Whether `path` starts as a ZIP archive does (a local file header).
bool looks_like_zip(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // let the archive reader say why
  char magic[4] = {};
  const ssize_t n = ::read(fd, magic, sizeof magic);
  ::close(fd);
  return n == 4 && std::string_view(magic, 4) == std::string_view("PK\x03\x04", 4);
}

// The signature's part of verify: nothing when no --key/--certificate-chain
// was given or no signature was found (without --require-signature).
// An embedded signature's bundle is checked here; its records once verify has
// digested them (match_embedded, after the report).
struct SignatureOutcome {
  bool asked = false;
  std::optional<SignatureCheck> check;
  std::string looked_for;  // the signature path tried, when none was found
  bool records_pending = false;  // embedded: the statement not yet compared with the records
  bool embedded_unchecked = false;  // no --key or roots, and the archive carries a signature
};

// The archive's embedded signature, when MODEL is an archive that has one:
// only the kinds run_verify_archive checks (the records are compared there; a
// record planted in a torch.save file is not a signature).
std::optional<std::string> embedded_bundle(const std::string& model) {
  if (model == "-" || is_directory(model) || !looks_like_zip(model)) return std::nullopt;
  try {
    const TorchArchive archive(open_file_source(model));
    const FileKind kind = archive.kind();
    if (kind != FileKind::TorchScript && kind != FileKind::LiteInterpreter && kind != FileKind::ExportedProgram) {
      return std::nullopt;
    }
    if (const Record* record = find_embedded_signature(archive)) return archive.read(*record, kMaxBundleBytes);
  } catch (const Error&) {
    // Not an archive verify reads: its own checks say why; a detached signature may still apply.
  }
  return std::nullopt;
}

SignatureTrust read_trust(const VerifyCliOptions& opts) {
  SignatureTrust trust;
  if (!opts.key.empty()) {
    trust.public_key_file = opts.key;
    trust.public_key_pem = read_signing_file(opts.key, "the public key");
  }
  for (const std::string& root : opts.roots) {
    trust.root_files.push_back(root);
    trust.root_pems.push_back(read_signing_file(root, "the certificate roots"));
  }
  if (!opts.trust_root.empty()) {
    trust.trust_root_file = opts.trust_root;
    trust.trust_root_json = read_signing_file(opts.trust_root, "the Sigstore trust root");
    trust.identity = opts.identity;
    trust.oidc_issuer = opts.issuer;
  }
  return trust;
}

SignatureOutcome check_signature(const VerifyCliOptions& opts) {
  SignatureOutcome out;
  out.asked = trusts_a_signer(opts);
  if (!out.asked) return out;
  // --signature first, then the archive's own, then MODEL.sig beside it.
  if (opts.signature.empty()) {
    if (const std::optional<std::string> bundle = embedded_bundle(opts.model)) {
      out.check = check_embedded_bundle(*bundle, read_trust(opts), opts.model);
      out.records_pending = true;
      return out;
    }
  }
  const std::string path = opts.signature.empty() ? default_signature_path(opts.model) : opts.signature;
  if (opts.signature.empty() && !exists(path)) {
    out.looked_for = path;
    if (opts.require_signature) {
      throw_signature_invalid("the model is not signed: no " + path + " and no embedded " + kEmbeddedSignatureRecord,
                              opts.model, "sign it with 'tsarchive sign', or give its signature with --signature SIG");
    }
    return out;
  }
  const SignatureTrust trust = read_trust(opts);
  const std::string bundle = read_signing_file(path, "the signature");
  ModelFilesOptions files;
  for (const std::string& p : opts.ignore_paths) files.ignore_paths.push_back(p);
  files.threads = opts.threads;
  out.check = check_model_signature(opts.model, path, bundle, trust, files);
  return out;
}

void render_signature_text(const SignatureOutcome& s, std::ostream& out) {
  if (s.embedded_unchecked) {
    out << "signature  " << kEmbeddedSignatureRecord << " (embedded): not checked (give --key or --certificate-chain)\n";
  }
  if (!s.check) {
    if (!s.looked_for.empty()) out << "signature  none (no " << s.looked_for << ")\n";
    return;
  }
  const SignatureCheck& c = *s.check;
  out << "signature  " << c.signature_path << (c.embedded ? " (embedded)" : "") << ": ";
  if (s.records_pending) {
    out << "valid, records not compared (the archive is damaged), ";
  } else if (c.embedded && !c.matches()) {
    out << "does not cover the archive, ";
  } else {
    out << (c.matches() ? "valid" : "valid, but the model differs") << ", ";
  }
  if (c.method == "key") {
    out << "signed by key sha256:" << c.key_fingerprint << " (" << c.curve << ")\n";
  } else if (c.method == "keyless") {
    out << "signed by " << c.subject << ", issued by " << c.issuer << " (Sigstore keyless, " << c.curve << ")\n"
        << "  logged   " << c.transparency << '\n';
  } else {
    out << "signed by " << c.subject << ", issued by " << c.issuer << " (key sha256:" << c.key_fingerprint.substr(0, 16)
        << "..., " << c.curve << ")\n";
  }
  out << (c.embedded ? "  records  " : "  files    ") << c.statement.files.size() << " signed";
  if (c.v02_encoding) out << " (model_signing 0.2 encoding)";
  if (c.predicate_type != kPredicateV1) out << " (predicate " << c.predicate_type << ")";
  out << '\n';
  for (const std::string& f : c.changed) out << "  changed  " << f << '\n';
  for (const std::string& f : c.missing) out << "  missing  " << f << '\n';
  for (const std::string& f : c.added) out << "  added    " << f << '\n';
}

nlohmann::ordered_json signature_to_json(const SignatureOutcome& s) {
  if (!s.check) return nullptr;
  const SignatureCheck& c = *s.check;
  nlohmann::ordered_json doc = {{"path", c.signature_path}, {"embedded", c.embedded}, {"method", c.method},
                                {"valid", !(c.embedded && !c.matches())}, {"matches", !s.records_pending && c.matches()},
                                {"key_sha256", c.key_fingerprint}, {"curve", c.curve}};
  if (c.method != "key") {
    doc["subject"] = c.subject;
    doc["issuer"] = c.issuer;
  }
  if (c.method == "keyless") doc["transparency_log"] = c.transparency;
  doc["predicate_type"] = c.predicate_type;
  doc["files"] = c.statement.files.size();
  doc["changed"] = c.changed;
  doc["missing"] = c.missing;
  doc["added"] = c.added;
  return doc;
}

// One line naming the first difference and how many more.
std::string differences(const SignatureCheck& c) {
  std::string first;
  if (c.changed.size() == 1 && c.changed.front() == ".") return "its SHA-256 is not the one signed (the file changed)";
  if (!c.changed.empty()) first = "'" + c.changed.front() + "' changed";
  else if (!c.missing.empty()) first = "'" + c.missing.front() + "' missing";
  else first = "'" + c.added.front() + "' added (not signed)";
  const size_t more = c.changed.size() + c.missing.size() + c.added.size() - 1;
  return first + (more > 0 ? " and " + std::to_string(more) + " more" : std::string());
}

// A directory, or a file that is not an archive: the signature is the whole check.
int run_verify_signature_only(const VerifyCliOptions& opts, Context& ctx) {
  if (!trusts_a_signer(opts)) {
    throw Error(ErrorKind::Usage,
                is_directory(opts.model) ? "a directory is verified by its signature" : "not a ZIP archive", opts.model,
                "give --key PUBLIC.pem or --certificate-chain ROOTS.pem to check its signature");
  }
  const SignatureOutcome s = check_signature(opts);
  if (!s.check) {
    throw_signature_invalid("the model is not signed: no " + s.looked_for, opts.model,
                            "give its signature with --signature SIG");
  }
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.verify/1"}, {"path", opts.model},
                                  {"outcome", s.check->matches() ? "intact" : "mismatch"},
                                  {"signature", signature_to_json(s)}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
  } else {
    write_text(ctx.out, [&](std::ostream& block) {
      block << (s.check->matches() ? "intact: " + opts.model + " matches its signature"
                                   : "CHANGED: " + opts.model + " differs from what was signed")
            << '\n';
      render_signature_text(s, block);
    });
  }
  if (!s.check->matches()) {
    print_error(ctx.err, Error(ErrorKind::CheckFailed, "the model differs from what was signed: " + differences(*s.check),
                               opts.model, "do not deploy it; fetch the signed model again"));
    return verify_exit_code(VerifyOutcome::Mismatch);
  }
  return 0;
}

// An archive: the core's checks, and the signature's verdict from `pending`.

// An embedded signature's records are the ones verify digested (a damaged
// archive's are not compared: the damage is the answer).
void match_embedded(SignatureOutcome& s, const VerifyReport& report, const std::string& model) {
  if (!s.records_pending || report.outcome() == VerifyOutcome::Malformed) return;
  match_embedded_records(*s.check, report.records, model);
  s.records_pending = false;
}

// An embedded signature that does not list exactly the archive's other
// records: the error (exit 7), after the report was printed.
bool refuse_uncovered(const SignatureOutcome& s, const std::string& model, Context& ctx) {
  if (!s.check || !s.check->embedded || s.records_pending || s.check->matches()) return false;
  print_error(ctx.err, Error(ErrorKind::SignatureInvalid,
                             "the embedded signature (" + std::string(kEmbeddedSignatureRecord) +
                                 ") does not cover the archive: " + differences(*s.check),
                             model, "do not deploy it; sign it again, or fetch the signed model again"));
  return true;
}

// Exit 8 with the worst finding, after the report was printed.
int refuse_unsafe(const LoadSafety& safety, const std::string& path, Context& ctx) {
  print_error(ctx.err, Error(ErrorKind::UnsafeToLoad, "unsafe to load: " + load_safety_summary(safety), path,
                             "do not load it with torch.load or pickle.load; if every global it names is your own "
                             "class, name it with --allow-global MODULE.NAME"));
  return static_cast<int>(ErrorKind::UnsafeToLoad);
}

// torch.save files (ZIP or legacy) and plain pickles: the load-safety verdict
// is the check. Nothing when the file is an archive that verify's own checks take.
std::optional<int> verify_load_safety_only(const VerifyCliOptions& opts, Context& ctx,
                                          std::future<SignatureOutcome>& pending) {
  if (opts.model == "-") return std::nullopt;
  const auto source = open_file_source(opts.model);
  FileKind kind = detect_file_kind(*source);
  LoadSafety safety;
  if (kind == FileKind::OtherZip) {
    const TorchArchive archive(borrow_source(*source));  // the ZIP checks' refusal stands
    if (archive.kind() != FileKind::TorchSave) return std::nullopt;
    kind = FileKind::TorchSave;
    safety = assess_archive_load_safety(archive, opts.load_safety);
  } else if (kind == FileKind::LegacyTorchSave || (kind == FileKind::NotAModel && looks_like_pickle(*source))) {
    if (kind == FileKind::NotAModel) kind = FileKind::Pickle;
    safety = assess_load_safety(*source, opts.load_safety);
  } else {
    return std::nullopt;
  }
  const bool unsafe = safety.unsafe();
  const SignatureOutcome signature = pending.get();
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.verify-load/1"},
                                  {"file", opts.model},
                                  {"kind", file_kind_id(kind)},
                                  {"outcome", unsafe ? "unsafe_to_load" : "safe_to_load"},
                                  {"load_safety", load_safety_to_json(safety)}};
    if (signature.asked) doc["signature"] = signature_to_json(signature);
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
  } else {
    std::ostringstream text;
    write_text(text, [&](std::ostream& block) {
      block << shown(opts.model) << ": " << (unsafe ? "UNSAFE to load" : "safe to load") << " ("
            << file_kind_name(kind) << ")\n";
      render_load_safety_text(safety, block);
      render_signature_text(signature, block);
    });
    std::string block = text.str();
    if (color_out(ctx)) {
      const size_t eol = block.find('\n');
      block = painted(block.substr(0, eol), unsafe ? "31" : "32") + block.substr(eol);
    }
    ctx.out << block;
  }
  const bool changed = signature.check && !signature.check->matches();
  if (changed) {
    print_error(ctx.err, Error(ErrorKind::CheckFailed, "the file differs from what was signed: " +
                                                           differences(*signature.check),
                               opts.model, "do not deploy it; fetch the signed model again"));
  }
  if (unsafe) return refuse_unsafe(safety, opts.model, ctx);
  return changed ? verify_exit_code(VerifyOutcome::Mismatch) : 0;
}

int run_verify_archive(const VerifyCliOptions& opts, Context& ctx, std::future<SignatureOutcome>& pending) {
  const OpenedArchive opened(opts.model, FileAccess::Read, kReaderLockTimeout, "cannot verify this file", notes_on(ctx.err), true);
  const TorchArchive* archive = &opened.archive();
  const bool pt2 = archive->kind() == FileKind::ExportedProgram;
  if (opts.load && pt2) {
    // A package's compiled code is code: only `run` loads it, on request.
    throw Error(ErrorKind::Usage, "--load does not load a .pt2 (an AOTInductor package's compiled code is code)",
                opts.model, "leave out --load; the core's checks need no libtorch");
  }
  const VerifyReport report = verify_archive(*archive, VerifyOptions{opts.threads, built_libtorch_versions()});
  SignatureOutcome signature = pending.get();
  match_embedded(signature, report, opts.model);
  signature.embedded_unchecked = !signature.asked && find_embedded_signature(*archive) != nullptr;
  // The verdict reads the pickles again: only once verify found them whole
  // (a damaged record is the answer already, named in the report).
  const LoadSafety safety =
      report.problems.empty() ? assess_archive_load_safety(*archive, opts.load_safety) : LoadSafety{};
  const bool unsafe = safety.unsafe() && report.outcome() == VerifyOutcome::Intact;
  // libtorch sees the archive only once the core found nothing wrong with it.
  const bool load = opts.load && !unsafe && report.outcome() != VerifyOutcome::Malformed &&
                    report.outcome() != VerifyOutcome::Unreadable;
  if (load) {
    const CheckedArchive checked = admit_verified(opened.file(), *archive, report, "nothing was loaded");
    in_worker<std::string>(worker_job(opts.worker, checked, "loading the module", notes_on(ctx.err)), [&](TorchBackend& torch) {
      torch.load(checked.libtorch_path(), opts.model);
      return std::string();
    });
  }
  if (opts.json) {
    nlohmann::ordered_json doc = verify_to_json(report, load);
    if (signature.asked) doc["signature"] = signature_to_json(signature);
    doc["load_safety"] = report.problems.empty() ? load_safety_to_json(safety) : nlohmann::ordered_json();
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
  } else {
    std::ostringstream text;
    write_text(text, [&](std::ostream& block) {
      render_verify_text(report, load, block);
      render_signature_text(signature, block);
      if (safety.unsafe()) render_load_safety_text(safety, block);
    });
    std::string block = text.str();
    if (color_out(ctx)) {  // the verdict line: green intact, yellow unreadable, red otherwise
      const size_t eol = block.find('\n');
      const VerifyOutcome outcome = report.outcome();
      const char* sgr = outcome == VerifyOutcome::Intact ? "32" : outcome == VerifyOutcome::Unreadable ? "33" : "31";
      block = painted(block.substr(0, eol), sgr) + block.substr(eol);
    }
    ctx.out << block;
  }
  if (report.outcome() == VerifyOutcome::Malformed) {
    print_error(ctx.err, Error(ErrorKind::BadInput, "the archive is damaged: " + report.problems.front(), opts.model,
                               "do not deploy it; re-export it or fetch it again"));
  }
  if (report.outcome() == VerifyOutcome::Unreadable) {
    print_error(ctx.err, Error(ErrorKind::BadInput, report.unreadable.front(), opts.model,
                               pt2 ? "load it with the PyTorch that wrote it" : newer_libtorch_hint()));
  }
  if (refuse_uncovered(signature, opts.model, ctx)) return static_cast<int>(ErrorKind::SignatureInvalid);
  const bool signature_changed = signature.check && !signature.check->embedded && !signature.check->matches() &&
                                 report.outcome() != VerifyOutcome::Malformed;
  if (signature_changed) {
    print_error(ctx.err, Error(ErrorKind::CheckFailed, "the archive differs from what was signed: " +
                                                           differences(*signature.check),
                               opts.model, "do not deploy it; fetch the signed model again"));
  }
  if (unsafe) return refuse_unsafe(safety, opts.model, ctx);
  if (signature_changed) return verify_exit_code(VerifyOutcome::Mismatch);
  if (report.outcome() == VerifyOutcome::Intact && opts.require_stamp && !report.stamp) {
    print_error(ctx.err, Error(ErrorKind::CheckFailed,
                               "not stamped by tsarchive" + (report.producer_info ? " (extra/" + std::string(kStampName) +
                                                                                        " is the producer's own)"
                                                                                  : std::string()),
                               opts.model, "stamp it with 'tsarchive stamp', or leave out --require-stamp"));
    return verify_exit_code(VerifyOutcome::Mismatch);
  }
  return verify_exit_code(report.outcome());
}

int run_verify(const VerifyCliOptions& opts, Context& ctx) {
  if (is_directory(opts.model) || (trusts_a_signer(opts) && !looks_like_zip(opts.model))) {
    return run_verify_signature_only(opts, ctx);
  }
  // The signature's hash of the whole file and the core's checks of its
  // records read the same bytes: side by side, so that with a core to spare
  // verify costs about one pass, not two. Its verdict (exit 7) comes first,
  // even when the archive cannot be read.
  std::future<SignatureOutcome> pending = std::async(std::launch::async, [&opts] { return check_signature(opts); });
  try {
    // torch.save files and plain pickles: the load-safety verdict is the check.
    if (const std::optional<int> code = verify_load_safety_only(opts, ctx, pending)) return *code;
    return run_verify_archive(opts, ctx, pending);
  } catch (...) {
    if (pending.valid()) pending.get();  // throws the signature's error, if it has one
    throw;
  }
}

// Directories become the regular files below them, in name order (symbolic
// links are not followed): what a hub scans of an upload.
std::vector<std::string> files_below(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (p == "-" || !fs::is_directory(fs::symlink_status(p, ec))) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->is_symlink(ec)) found.push_back(it->path().string());
    }
    if (ec) throw_io("cannot list the directory: " + ec.message(), p);
    if (found.empty()) throw_usage("the directory " + p + " holds no files");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace

Runner setup_verify(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<VerifyCliOptions>();
  app.description(
      "Check that an archive is intact: ZIP structure, every record's CRC-32 and size, tensor records that hold\n"
      "their storages, a format version libtorch reads, and, when it is stamped, every record's SHA-256 against\n"
      "the stamp. Does not load libtorch unless --load.\n"
      "An intact archive whose format or bytecode version the linked libtorch does not read (written by a newer\n"
      "PyTorch) is reported as such, not as damaged.\n"
      "With --key or --certificate-chain, also the model's signature (OpenSSF model signing, as `tsarchive sign`\n"
      "and `python -m model_signing sign key|certificate` write it): who signed, and that every file or the\n"
      "archive is exactly what was signed. With --trust-root, --identity and --issuer, a Sigstore keyless\n"
      "signature (`model_signing sign sigstore`) is checked offline: its Fulcio certificate and Rekor log\n"
      "entry. A model directory is then checked by its signature alone. An archive's\n"
      "embedded signature (`tsarchive sign --embed`) is found without --signature and must list exactly its\n"
      "other records.\n"
      "Every file also gets the load-safety verdict (docs/load-safety.md): what torch.load, pickle.load,\n"
      "torch.jit.load or torch.export.load would import and call, judged by an allowlist; a file that would\n"
      "run anything beyond it, or is crafted to attack a loader, exits 8. torch.save files (ZIP and legacy)\n"
      "and plain pickle files are verified by that verdict alone. Without --key or --certificate-chain a\n"
      "directory is scanned as a hub scans an upload: every regular file below it.\n"
      "Exit 0 intact, 1 changed since it was stamped or signed (or not stamped, with --require-stamp), 3 damaged,\n"
      "or unreadable by this libtorch, 7 the signature is invalid or its signer not trusted (or, with\n"
      "--require-signature, there is none), 8 unsafe to load.\n"
      "A .pt2 gets the same checks (its programs and weight configs read as inspect reads them, every weight\n"
      "record holding its tensor, archive_format and archive_version as torch.export.load wants them); --load\n"
      "does not take one.");
  app.add_option("model", opts->models,
                 "TorchScript archives (.pt, .ptl), .pt2, torch.save or pickle files, or directories of them; - reads "
                 "standard input")
      ->required();
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.verify/1); JSON Lines for several files");
  app.add_flag("--load", opts->load, "Also load the module with libtorch (after the checks pass); runs nothing");
  app.add_flag("--require-stamp", opts->require_stamp,
               "Exit 1 when the archive carries no tsarchive stamp (a producer's own producer_info.json is not one)");
  app.add_option("--threads", opts->threads, "Hashing threads (default: one per core)")->check(CLI::Range(1u, 256u));
  CLI::Option* key = app.add_option("--key", opts->key,
                 "Check the model's signature (OpenSSF model signing) against this public key (PEM, EC P-256/384/521)")
      ->type_name("PUBLIC.pem");
  CLI::Option* roots = app.add_option("--certificate-chain", opts->roots,
                 "Check the model's signature against these root certificates (model_signing's certificate method)")
      ->type_name("ROOTS.pem")
      ->excludes(key);
  CLI::Option* trust_root =
      app.add_option("--trust-root", opts->trust_root,
                     "Check a Sigstore keyless signature offline against this trust root (trusted_root.json); "
                     "needs --identity and --issuer")
          ->type_name("trusted_root.json")
          ->excludes(key)
          ->excludes(roots);
  app.add_option("--identity", opts->identity, "With --trust-root: the signer's email or URI, exactly as in its certificate")
      ->type_name("ID")
      ->needs(trust_root);
  app.add_option("--issuer", opts->issuer, "With --trust-root: the OIDC issuer URL of the signer's identity, exactly")
      ->type_name("URL")
      ->needs(trust_root);
  app.add_option("--signature", opts->signature,
                 "The signature file (default: the archive's embedded signature, else MODEL.sig beside a file, "
                 "MODEL/model.sig in a directory)")
      ->type_name("SIG");
  app.add_flag("--require-signature", opts->require_signature,
               "Exit 7 when no signature is found, embedded or not (with --key, --certificate-chain or --trust-root)");
  app.add_option("--ignore-paths", opts->ignore_paths,
                 "Files of a model directory that are not checked against the signature (relative to it)")
      ->type_name("PATH");
  add_load_safety_options(app, opts->load_safety);
  add_worker_options(app, opts->worker, false, "With --load: ");  // verify never skips its checks
  return [opts, &ctx] {
    if ((!opts->signature.empty() || opts->require_signature) && !trusts_a_signer(*opts)) {
      throw_usage("--signature and --require-signature need --key PUBLIC.pem, --certificate-chain ROOTS.pem or --trust-root",
                  "say whom you trust: the signer's public key, the roots of its certificate, or Sigstore's trust root");
    }
    if (!opts->trust_root.empty() && (opts->identity.empty() || opts->issuer.empty())) {
      throw_usage("--trust-root needs --identity ID and --issuer URL",
                  "say who must have signed: the certificate's email or URI, and its OIDC issuer");
    }
    if (!opts->signature.empty() && opts->models.size() > 1) {
      throw_usage("--signature names one signature, and several models are given", "verify them one at a time");
    }
    // A directory with a key or roots is a signed model; without, the files below it.
    const bool signed_models = trusts_a_signer(*opts);
    return for_each_file(signed_models ? opts->models : files_below(opts->models), opts->json, ctx,
                         [&](const std::string& model) {
      opts->model = model;
      return run_verify(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli
