// tsarchive verify MODEL... [--json] [--load [--memory-limit SIZE] [--time-limit S]] [--threads N]
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/many_files.h"
#include "cli/opened_archive.h"
#include "cli/output.h"
#include "cli/report_verify.h"
#include "base/error.h"
#include "core/file_edit.h"
#include "contract/torch_backend.h"
#include "core/verify.h"
#include "cli/worker_options.h"
#include "core/checked_archive.h"

namespace tsarchive::cli {
namespace {

struct VerifyCliOptions {
  std::vector<std::string> models;
  std::string model;  // the one being verified
  bool json = false;
  bool load = false;
  bool require_stamp = false;
  unsigned threads = 0;
  WorkerOptions worker;
};

int run_verify(const VerifyCliOptions& opts, Context& ctx) {
  const OpenedArchive opened(opts.model, FileAccess::Read, kReaderLockTimeout, "cannot verify this file", ctx, true);
  const TorchArchive* archive = &opened.archive();
  const bool pt2 = archive->kind() == FileKind::ExportedProgram;
  if (opts.load && pt2) {
    // A package's compiled code is code: only `run` loads it, on request.
    throw Error(ErrorKind::Usage, "--load does not load a .pt2 (an AOTInductor package's compiled code is code)",
                opts.model, "leave out --load; the core's checks need no libtorch");
  }
  const VerifyReport report = verify_archive(*archive, VerifyOptions{opts.threads, built_libtorch_versions()});
  // libtorch sees the archive only once the core found nothing wrong with it.
  const bool load = opts.load && report.outcome() != VerifyOutcome::Malformed &&
                    report.outcome() != VerifyOutcome::Unreadable;
  if (load) {
    const CheckedArchive checked = admit_verified(opened.file(), *archive, report, "nothing was loaded");
    in_worker<std::string>(worker_job(opts.worker, checked, "loading the module", ctx.err), [&](TorchBackend& torch) {
      torch.load(checked.libtorch_path(), opts.model);
      return std::string();
    });
  }
  if (opts.json) {
    ctx.out << json_text(verify_to_json(report, load), ctx.json_indent) << '\n';
  } else {
    std::ostringstream text;
    write_text(text, [&](std::ostream& block) { render_verify_text(report, load, block); });
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
      "unreadable by this libtorch.\n"
      "A .pt2 gets the same checks (its programs and weight configs read as inspect reads them, every weight\n"
      "record holding its tensor, archive_format and archive_version as torch.export.load wants them); --load\n"
      "does not take one.");
  app.add_option("model", opts->models, "TorchScript archives (.pt, .ptl) or .pt2; - reads standard input")->required();
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.verify/1); JSON Lines for several files");
  app.add_flag("--load", opts->load, "Also load the module with libtorch (after the checks pass); runs nothing");
  app.add_flag("--require-stamp", opts->require_stamp,
               "Exit 1 when the archive carries no tsarchive stamp (a producer's own producer_info.json is not one)");
  app.add_option("--threads", opts->threads, "Hashing threads (default: one per core)")->check(CLI::Range(1u, 256u));
  add_worker_options(app, opts->worker, false, "With --load: ");  // verify never skips its checks
  return [opts, &ctx] {
    return for_each_file(opts->models, opts->json, ctx, [&](const std::string& model) {
      opts->model = model;
      return run_verify(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli
