#include "cli/convert_options.h"

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/strings.h"
#include "cli/output.h"
#include "cli/report_jit.h"
#include "cli/run_options.h"
#include "core/inputs/input_values.h"
#include "core/edit/output_paths.h"

namespace tsarchive::cli {

void add_convert_options(CLI::App& app, ConvertOptions& opts, Context& ctx) {
  app.add_option("model", opts.model, "TorchScript archive (.pt) to read; it is never changed")->required();
  app.add_option("-o,--output", opts.output, "Where to write the new archive (.pt, or .ptl for the lite interpreter)")
      ->required();
  app.add_option("-m,--method", opts.method, "Method to convert and check (default: forward)");
  app.add_option("-i,--input", opts.inputs,
                 "A check input as for 'tsarchive run': SHAPE[:DTYPE[:FILL]], @x.npy, @x.pt, json:... (repeat)");
  app.add_option("--seed", opts.seed, "Seed of generated inputs (default: 0; same values as Python's torch.manual_seed)");
  app.add_option("--atol", opts.atol, "Absolute tolerance against the original (default 1e-5 x each output's largest |value|, at least 1e-5); PATH=A for one output");
  app.add_option("--rtol", opts.rtol, "Relative tolerance against the original (default 1e-3); PATH=R for one output");
  app.add_flag("--freeze", opts.freeze, "Freeze: inline parameters and submodules as constants, fold conv+batchnorm");
  app.add_flag("--optimize-for-inference", opts.optimize_for_inference,
               "Freeze, then libtorch's server optimizations (MKL-DNN layouts, fusions)");
  app.add_flag("--mobile", opts.mobile, "optimize_for_mobile: fold conv+batchnorm, freeze, prepack for XNNPACK");
  app.add_flag("--lite", opts.lite,
               "Write a lite-interpreter archive (_save_for_mobile); implied by an OUTPUT ending in .ptl");
  app.add_flag("--no-host", opts.no_host, "Leave the host name and user out of the stamp");
  app.add_flag("--no-git", opts.no_git, "Leave the git checkout of the working directory out of the stamp");
  app.add_flag("--json", opts.json,
               std::string("One JSON document (schema tsarchive.") + (opts.trace ? "trace" : "convert") + "/1)");
  app.add_flag("-v,--verbose", ctx.verbose, "On a libtorch error, also print its full message");
  app.add_flag("--allow-drop", opts.allow_drop,
               "Write the archive even though it lacks methods of the original (a trace records one method); "
               "without it that is an error and nothing is written");
  add_worker_options(app, opts.worker, true);
  note_input_budget(app, "--input");
}

namespace {

// What the options ask, checked before the archive is opened.
ConvertSettings settings_from_options(const ConvertOptions& opts, const char* command) {
  if (opts.optimize_for_inference && opts.mobile) {
    throw_usage("--optimize-for-inference (servers: MKL-DNN) and --mobile (phones: XNNPACK) exclude each other",
                "choose the one for where the model runs");
  }
  // trace and convert never change their input, nor a check input: refuse
  // before any work rather than fail at the rename.
  std::vector<NamedPath> inputs = input_files(opts.inputs, "--input");
  inputs.push_back({"the model", opts.model});
  check_output_paths({{"-o", opts.output}}, inputs);
  if (is_standard_stream(opts.output)) {
    throw_usage(std::string("-o -: ") + command + " cannot write to standard output: the new archive is loaded back "
                "and checked in a file before it is written", "write to a file with -o FILE, then pipe that");
  }
  const std::string top = stem_of(opts.output);
  if (top.empty() || top == "." || top == ".." || top.size() > 200) {
    throw_usage("-o " + opts.output.substr(0, 80) + " is not a file name libtorch can name an archive after",
                "give a file name such as deploy.pt or model.ptl");
  }

  ConvertSettings settings;
  settings.model = opts.model;
  settings.output = opts.output;
  settings.strict = opts.strict;
  settings.allow_drop = opts.allow_drop;
  settings.host = !opts.no_host;
  settings.git = !opts.no_git;
  settings.worker = opts.worker;
  ConvertRequest& request = settings.request;
  request.trace = opts.trace;
  request.fresh_inputs = opts.trace ? opts.check_inputs : 0;
  request.freeze = opts.freeze;
  request.optimize_for_inference = opts.optimize_for_inference;
  request.optimize_for_mobile = opts.mobile;
  request.lite = opts.lite || ends_with(opts.output, ".ptl");
  RunRequest& source = request.source;
  source.display_name = opts.model;
  source.method = opts.method.empty() ? "forward" : opts.method;
  source.seed = opts.seed;
  InputBudget budget = input_budget(opts.worker);
  for (const std::string& text : opts.inputs) source.inputs.push_back(parse_input_argument(text, budget));
  source.tolerance.scaled = true;  // until --atol says otherwise (contract/run.h)
  apply_tolerances(opts.atol, "--atol", source);
  apply_tolerances(opts.rtol, "--rtol", source);
  return settings;
}

}  // namespace

int run_convert(const ConvertOptions& opts, Context& ctx) {
  const char* command = opts.trace ? "trace" : "convert";
  const ConvertResult result = convert_archive(settings_from_options(opts, command), notes_on(ctx.err));
  const ConvertReport& report = result.report;
  const ConvertOutcome& outcome = result.outcome;
  if (opts.json) {
    ctx.out << json_text(convert_to_json(report, outcome)) << '\n';
  } else {
    write_text(ctx.out, [&](std::ostream& text) { render_convert_text(report, outcome, text); });
  }
  for (const TraceWarning& w : report.warnings) print_warning(ctx.err, w.message, opts.model);
  for (const std::string& note : report.notes) print_note(ctx.err, note);
  if (!outcome.failure.empty()) {
    print_error(ctx.err, Error(ErrorKind::CheckFailed, outcome.failure, opts.model,
                               "nothing was written; " + outcome.failure_hint));
    return static_cast<int>(ErrorKind::CheckFailed);
  }
  return 0;
}

}  // namespace tsarchive::cli
