// tsarchive diff OLD NEW [--json] [-q] [--no-tensors] [--no-code] [--full]
#include <cstdint>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/many_files.h"
#include "cli/output.h"
#include "cli/report_diff.h"
#include "core/compare/diff.h"
#include "base/error.h"
#include "core/edit/file_edit.h"

namespace tsarchive::cli {
namespace {

struct DiffCommandOptions {
  std::string old_path;
  std::string new_path;
  bool json = false;
  bool quiet = false;
  bool no_tensors = false;
  bool no_code = false;
  bool full = false;
  bool ignore_stamp = false;
  bool ignore_extra = false;
};

int run_diff(const DiffCommandOptions& opts, Context& ctx) {
  DiffOptions options;
  // The answer comes from the records alone; --quiet skips what only explains it.
  options.tensors = !opts.no_tensors && !opts.quiet;
  options.code = !opts.no_code && !opts.quiet;
  if (opts.full) options.byte_compare_limit = UINT64_MAX;
  options.ignore_stamp = opts.ignore_stamp;
  options.ignore_extra = opts.ignore_extra;
  check_stdin_named_once({opts.old_path, opts.new_path});
  const ArchiveDiff diff = diff_files(opts.old_path, opts.new_path, options);
  for (const std::string& path : {opts.old_path, opts.new_path}) {
    if (const std::string note = interrupted_edit_note(path); !note.empty()) print_note(ctx.err, note);
  }
  if (opts.json) {
    ctx.out << json_text(diff_to_json(diff)) << '\n';
  } else if (!opts.quiet) {
    write_text(ctx.out, [&](std::ostream& text) { render_diff_text(diff, text); });
  }
  return diff.same() ? 0 : static_cast<int>(ErrorKind::CheckFailed);
}

}  // namespace

Runner setup_diff(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<DiffCommandOptions>();
  app.description(
      "Compare two TorchScript archives: records added, removed or changed; tensors (dtype, shape, and for\n"
      "same-shaped ones how many elements differ and by how much at most); code/ as a unified diff; extra/ files.\n"
      "Two .pt2 (or a .pt and a .pt2) compare the same way; a .pt2's tensors are its weights and constants by name.\n"
      "Exit status 0 when the archives hold the same records, 1 when they differ. Never loads the models.");
  app.add_option("old", opts->old_path, "The archive to compare from (.pt, .ptl, .pt2)")->required();
  app.add_option("new", opts->new_path, "The archive to compare to")->required();
  CLI::Option* json = app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.diff/2) instead of text");
  app.add_flag("-q,--quiet", opts->quiet, "Print nothing; only the exit status says whether they differ")->excludes(json);
  app.add_flag("--no-tensors", opts->no_tensors, "Do not read pickles and tensor data: records, code and extra/ only");
  app.add_flag("--no-code", opts->no_code, "Do not show code/ changes as diffs (they stay listed as records)");
  app.add_flag("--full", opts->full,
               "Compare the bytes of every record whose size and CRC-32 match, not only those up to 64 MiB (deflated "
               "ones up to 256 MiB)");
  app.add_flag("--ignore-stamp", opts->ignore_stamp,
               "Leave tsarchive's stamp out of the comparison: did the model change, whatever its provenance?");
  app.add_flag("--ignore-extra", opts->ignore_extra, "Leave every extra/ file (the stamp included) out of the comparison");
  return [opts, &ctx] { return run_diff(*opts, ctx); };
}

}  // namespace tsarchive::cli
