// tsarchive verify MODEL|DIR... [--json] [--load [--memory-limit SIZE] [--time-limit S]] [--threads N]
//                               [--torch-version V] [--allow-global MODULE.NAME]...
#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/load_options.h"
#include "cli/many_files.h"
#include "cli/opened_archive.h"
#include "cli/output.h"
#include "cli/report_load_safety.h"
#include "cli/report_verify.h"
#include "base/error.h"
#include "core/file_edit.h"
#include "contract/torch_backend.h"
#include "core/verify.h"
#include "cli/worker_options.h"

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
  WorkerOptions worker;
};

// Exit 8 with the worst finding, after the report was printed.
int refuse_unsafe(const LoadSafety& safety, const std::string& path, Context& ctx) {
  print_error(ctx.err, Error(ErrorKind::UnsafeToLoad, "unsafe to load: " + load_safety_summary(safety), path,
                             "do not load it with torch.load or pickle.load; if every global it names is your own "
                             "class, name it with --allow-global MODULE.NAME"));
  return static_cast<int>(ErrorKind::UnsafeToLoad);
}

// torch.save files (ZIP or legacy) and plain pickles: the load-safety verdict
// is the check. Nothing when the file is an archive that verify's own checks take.
std::optional<int> verify_load_safety_only(const VerifyCliOptions& opts, Context& ctx) {
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
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.verify-load/1"},
                                  {"file", opts.model},
                                  {"kind", file_kind_id(kind)},
                                  {"outcome", unsafe ? "unsafe_to_load" : "safe_to_load"},
                                  {"load_safety", load_safety_to_json(safety)}};
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
  } else {
    std::ostringstream text;
    write_text(text, [&](std::ostream& block) {
      block << shown(opts.model) << ": " << (unsafe ? "UNSAFE to load" : "safe to load") << " ("
            << file_kind_name(kind) << ")\n";
      render_load_safety_text(safety, block);
    });
    std::string block = text.str();
    if (color_out(ctx)) {
      const size_t eol = block.find('\n');
      block = painted(block.substr(0, eol), unsafe ? "31" : "32") + block.substr(eol);
    }
    ctx.out << block;
  }
  return unsafe ? refuse_unsafe(safety, opts.model, ctx) : 0;
}

int run_verify(const VerifyCliOptions& opts, Context& ctx) {
  if (const std::optional<int> code = verify_load_safety_only(opts, ctx)) return *code;
  const OpenedArchive opened(opts.model, FileAccess::Read, kReaderLockTimeout, "cannot verify this file", ctx, true);
  const TorchArchive* archive = &opened.archive();
  const bool pt2 = archive->kind() == FileKind::ExportedProgram;
  if (opts.load && pt2) {
    // A package's compiled code is code: only `run` loads it, on request.
    throw Error(ErrorKind::Usage, "--load does not load a .pt2 (an AOTInductor package's compiled code is code)",
                opts.model, "leave out --load; the core's checks need no libtorch");
  }
  const VerifyReport report = verify_archive(*archive, VerifyOptions{opts.threads, built_libtorch_versions()});
  const LoadSafety safety = assess_archive_load_safety(*archive, opts.load_safety);
  const bool unsafe = safety.unsafe() && report.outcome() == VerifyOutcome::Intact;
  // libtorch sees the archive only once the core found nothing wrong with it.
  const bool load = opts.load && !unsafe && report.outcome() != VerifyOutcome::Malformed &&
                    report.outcome() != VerifyOutcome::Unreadable;
  if (load) {
    in_worker<std::string>(opened.job(opts.worker, "loading the module"), [&](TorchBackend& torch) {
      torch.load(opened.descriptor_path(), opts.model);
      return std::string();
    });
  }
  if (opts.json) {
    nlohmann::ordered_json doc = verify_to_json(report, load);
    doc["load_safety"] = load_safety_to_json(safety);
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
  } else {
    std::ostringstream text;
    write_text(text, [&](std::ostream& block) {
      render_verify_text(report, load, block);
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
  if (unsafe) return refuse_unsafe(safety, opts.model, ctx);
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
      "Exit 0 intact, 1 changed since it was stamped (or not stamped, with --require-stamp), 3 damaged, or\n"
      "unreadable by this libtorch, 8 unsafe to load.\n"
      "Every file also gets the load-safety verdict (docs/load-safety.md): what torch.load, pickle.load,\n"
      "torch.jit.load or torch.export.load would import and call, judged by an allowlist; a file that would\n"
      "run anything beyond it, or is crafted to attack a loader, exits 8. torch.save files (ZIP and legacy)\n"
      "and plain pickle files are verified by that verdict alone. A directory is scanned as a hub scans an\n"
      "upload: every regular file below it.\n"
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
  add_load_safety_options(app, opts->load_safety);
  add_worker_options(app, opts->worker, false, "With --load: ");  // verify never skips its checks
  return [opts, &ctx] {
    return for_each_file(files_below(opts->models), opts->json, ctx, [&](const std::string& model) {
      opts->model = model;
      return run_verify(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli
