// tsarchive verify MODEL|DIR... [--json] [--load [--memory-limit SIZE] [--time-limit S]] [--threads N]
//   [--torch-version V] [--allow-global MODULE.NAME]...
//   [--key PUBLIC.pem | --certificate-chain ROOTS.pem... | --trust-root trusted_root.json --identity ID --issuer URL]
//   [--signature SIG] [--require-signature | --allow-unsigned]
//
// The options, then verify_model (operations/verify.h), then its report. With
// --key, --certificate-chain or --trust-root (Sigstore keyless) a model that is
// a directory is checked by its signature alone; without them a directory is
// scanned file by file, as a hub scans an upload.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/load_options.h"
#include "cli/many_files.h"
#include "cli/output.h"
#include "cli/report_load_safety.h"
#include "cli/report_verify.h"
#include "cli/signer_options.h"
#include "cli/worker_options.h"
#include "core/provenance/signing_embedded.h"
#include "operations/verify.h"

namespace tsarchive::cli {
namespace {

struct VerifyCliOptions {
  std::vector<std::string> models;
  bool json = false;
  VerifySettings settings;
};

void render_signature_text(const SignatureOutcome& s, std::ostream& out) {
  if (s.embedded_unchecked) {
    out << "signature  " << kEmbeddedSignatureRecord << " (embedded): not checked (give --key or --certificate-chain)\n";
  }
  if (!s.check && !s.embedded_refused.empty()) {
    out << "signature  " << kEmbeddedSignatureRecord << " (embedded): cannot be checked ("
        << printable(s.embedded_refused) << ")\n";
    return;
  }
  if (!s.check) {
    if (!s.looked_for.empty()) out << "signature  none (no " << printable(s.looked_for) << "; --allow-unsigned)\n";
    return;
  }
  const SignatureCheck& c = *s.check;
  out << "signature  " << printable(c.signature_path) << (c.embedded ? " (embedded)" : "") << ": ";
  if (s.records_pending) {
    out << "valid, records not compared (the archive is damaged), ";
  } else if (c.embedded && !c.matches()) {
    out << "does not cover the archive, ";
  } else {
    out << (c.matches() ? "valid" : "valid, but the model differs") << ", ";
  }
  out << "signed by " << printable(signer_text(c)) << '\n';
  if (c.method == "keyless") out << "  logged   " << c.transparency << '\n';
  out << (c.embedded ? "  records  " : "  files    ") << c.statement.files.size() << " signed";
  if (c.v02_encoding) out << " (model_signing 0.2 encoding)";
  if (c.predicate_type != kPredicateV1) out << " (predicate " << c.predicate_type << ")";
  out << '\n';
  // Names from the signature and the model: escaped, so a name cannot fake a line.
  for (const std::string& f : c.changed) out << "  changed  " << printable(f) << '\n';
  for (const std::string& f : c.missing) out << "  missing  " << printable(f) << '\n';
  for (const std::string& f : c.added) out << "  added    " << printable(f) << '\n';
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

// A directory, or a file that is neither an archive nor a pickle: checked by its signature alone.
void render_signature_only(const VerifyResult& r, bool json, Context& ctx) {
  const bool matches = r.signature.check->matches();
  if (json) {
    const nlohmann::ordered_json doc = {{"schema", "tsarchive.verify/1"}, {"path", r.model},
                                        {"outcome", matches ? "intact" : "mismatch"},
                                        {"signature", signature_to_json(r.signature)}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  write_text(ctx.out, [&](std::ostream& block) {
    block << (matches ? "intact: " + printable(r.model) + " matches its signature"
                      : "CHANGED: " + printable(r.model) + " differs from what was signed")
          << '\n';
    render_signature_text(r.signature, block);
  });
}

// The text block with its first line, the verdict, painted when color is on.
void write_verdict_block(Context& ctx, const char* sgr, const std::function<void(std::ostream&)>& render) {
  std::ostringstream text;
  write_text(text, render);
  std::string block = text.str();
  if (color_out(ctx)) {
    const size_t eol = block.find('\n');
    block = painted(block.substr(0, eol), sgr) + block.substr(eol);
  }
  ctx.out << block;
}

// The first line of a file verified by its load-safety verdict: the failing
// check first (damage, then the verdict, then the signature), then what holds.
std::string load_safety_headline(const VerifyResult& r) {
  const std::string kind = " (" + std::string(file_kind_name(r.kind)) + ")";
  // What a pickle runs before the damage is the verdict's: unsafe wins.
  if (!r.problems.empty() && !r.unsafe) return "DAMAGED" + kind;
  const bool records = r.kind == FileKind::TorchSave || r.kind == FileKind::TorchPackage;
  if (r.unsafe) return (r.signature_fails ? "UNSAFE to load, and the SIGNATURE FAILS" : "UNSAFE to load") + kind;
  if (r.signature_fails) {
    return std::string(records ? "SIGNATURE FAILS; the records are intact and safe to load" : "SIGNATURE FAILS; safe to load") +
           kind;
  }
  return "safe to load" + kind;
}

// torch.save files, torch.package archives and plain pickles: the load-safety verdict
// (after a ZIP's structure and CRCs).
void render_load_safety_only(const VerifyResult& r, bool json, Context& ctx) {
  const bool damaged = !r.problems.empty() && !r.unsafe;
  if (json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.verify-load/1"},
                                  {"file", r.model},
                                  {"kind", file_kind_id(r.kind)},
                                  {"outcome", damaged ? "malformed" : r.unsafe ? "unsafe_to_load" : "safe_to_load"},
                                  {"problems", r.problems},
                                  {"load_safety", damaged ? nlohmann::ordered_json() : load_safety_to_json(r.safety)}};
    if (r.signature.asked) doc["signature"] = signature_to_json(r.signature);
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  write_verdict_block(ctx, r.unsafe || damaged || r.signature_fails ? "31" : "32", [&](std::ostream& block) {
    block << printable(r.model) << ": " << load_safety_headline(r) << '\n';
    for (const std::string& p : r.problems) block << "  problem   " << printable(p) << '\n';
    if (!damaged) render_load_safety_text(r.safety, block);
    render_signature_text(r.signature, block);
  });
}

// An archive: the core's report, the signature's, the load-safety verdict when unsafe.
void render_archive(const VerifyResult& r, bool json, Context& ctx) {
  const VerifyReport& report = *r.report;
  if (json) {
    nlohmann::ordered_json doc = verify_to_json(report, r.loaded);
    if (r.signature.asked) doc["signature"] = signature_to_json(r.signature);
    doc["load_safety"] = report.problems.empty() ? load_safety_to_json(r.safety) : nlohmann::ordered_json();
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  // The verdict line: green intact, yellow unreadable, red otherwise (and when the signature fails).
  const VerifyOutcome outcome = report.outcome();
  const char* sgr = r.signature_fails || r.unsafe      ? "31"
                    : outcome == VerifyOutcome::Intact     ? "32"
                    : outcome == VerifyOutcome::Unreadable ? "33"
                                                           : "31";
  write_verdict_block(ctx, sgr, [&](std::ostream& block) {
    render_verify_text(report, r.loaded, block, r.signature_fails, r.unsafe);
    render_signature_text(r.signature, block);
    if (r.safety.unsafe()) render_load_safety_text(r.safety, block);
  });
}

int run_verify(const VerifySettings& settings, bool json, Context& ctx) {
  const VerifyResult result = verify_model(settings, notes_on(ctx.err));
  switch (result.by) {
    case VerifiedBy::Signature: render_signature_only(result, json, ctx); break;
    case VerifiedBy::LoadSafety: render_load_safety_only(result, json, ctx); break;
    case VerifiedBy::Archive: render_archive(result, json, ctx); break;
  }
  for (const Error& finding : result.findings) print_error(ctx.err, finding);
  if (result.exit_code == static_cast<int>(ErrorKind::UnsafeToLoad)) {
    // --allow-global is the way out only for names the allowlist does not
    // know; never for what is known to be dangerous or crafted.
    const std::optional<LoadSafety::Acceptance> accept = result.safety.acceptance();
    std::string allow;  // --allow-global NAME for the first three names, then "..."
    if (accept) {
      for (size_t i = 0; i < accept->allow_globals.size() && i < 4; ++i) {
        allow += i < 3 ? " --allow-global " + accept->allow_globals[i] : " ...";
      }
      if (accept->load_library) allow += ", or give the library that defines it with --load-library LIB.so";
    }
    print_error(ctx.err, Error(ErrorKind::UnsafeToLoad, "unsafe to load: " + load_safety_summary(result.safety),
                               result.model,
                               accept ? "do not load it; if what it names is your own (a class, an operator "
                                        "library, a model you compiled), accept it with" + allow
                                      : result.kind == FileKind::TorchPackage
                                            ? "do not load it with torch.package.PackageImporter unless you trust the "
                                              "modules it names: loading it runs them"
                                            : "do not load it with torch.load, torch.jit.load or pickle.load: its "
                                              "findings say what loading it would do"));
  }
  return result.exit_code;
}

// Directories become the regular files below them, in name order (symbolic
// links are not followed): what a hub scans of an upload. `scanned` gets
// the files found in a directory (not those named on the command line).
std::vector<std::string> files_below(const std::vector<std::string>& paths, std::set<std::string>& scanned) {
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
    scanned.insert(found.begin(), found.end());
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
      "run anything beyond it, or is crafted to attack a loader, exits 8. torch.save files (ZIP, legacy, tar)\n"
      "and plain pickle files are verified by that verdict alone (a legacy file's raw storages too, as torch.load\n"
      "reads them). Without --key or --certificate-chain a directory is scanned as a hub scans an upload: every\n"
      "regular file below it; one that is no model by its first bytes (config.json, a README, ONNX) is skipped\n"
      "with the reason, unless named like one (.pt .pth .bin .ckpt .pt2 .ptl .pkl .pickle).\n"
      "Exit 0 intact, 1 changed since it was stamped or signed (or not stamped, with --require-stamp), 3 damaged,\n"
      "or unreadable by this libtorch, 7 the signature is invalid, its signer not trusted, or there is none\n"
      "(with a signer named and no --allow-unsigned), 8 unsafe to load.\n"
      "A .pt2 gets the same checks (its programs and weight configs read as inspect reads them, every weight\n"
      "record holding its tensor, archive_format and archive_version as torch.export.load wants them); --load\n"
      "does not take one.");
  app.add_option("model", opts->models,
                 "TorchScript archives (.pt, .ptl), .pt2, torch.save or pickle files, or directories of them; - reads "
                 "standard input")
      ->required();
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.verify/1); JSON Lines for several files");
  app.add_flag("--load", opts->settings.load, "Also load the module with libtorch (after the checks pass); runs nothing");
  app.add_flag("--require-stamp", opts->settings.require_stamp,
               "Exit 1 when the archive carries no tsarchive stamp (a producer's own producer_info.json is not one)");
  app.add_option("--threads", opts->settings.threads, "Hashing threads (default: one per core)")->check(CLI::Range(1u, 256u));
  add_signer_options(app, opts->settings, true);
  add_load_safety_options(app, opts->settings.load_safety);
  // verify never skips its checks, and never loads what its verdict calls unsafe.
  add_worker_options(app, opts->settings.worker, false, "With --load: ", false);
  return [opts, &ctx] {
    check_signer_options(opts->settings, opts->models.size());
    // A directory with a signer to trust is a signed model; without, the files below it.
    const bool signed_models = opts->settings.trusts_a_signer();
    std::set<std::string> scanned;
    return for_each_file(signed_models ? opts->models : files_below(opts->models, scanned), opts->json, ctx,
                         [&](const std::string& model) {
      // A directory's config.json or README is no model: skipped, with the reason.
      if (scanned.count(model) > 0) {
        if (const std::optional<std::string> why = not_a_model_file(model)) {
          if (opts->json) {
            ctx.out << json_text(nlohmann::ordered_json{{"schema", "tsarchive.skipped/1"},
                                                        {"file", model},
                                                        {"reason", *why}},
                                 ctx.json_indent)
                    << '\n';
          } else {
            ctx.out << printable(model) << ": skipped: " << printable(*why) << '\n';
          }
          return kSkippedFile;
        }
      }
      VerifySettings settings = opts->settings;
      settings.model = model;
      settings.all_sha256 = opts->json;  // --json lists every record's SHA-256
      return run_verify(settings, opts->json, ctx);
    });
  };
}

}  // namespace tsarchive::cli
