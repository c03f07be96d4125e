#include "cli/convert_flow.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include "base/build_info.h"
#include "base/strings.h"
#include "cli/gate.h"
#include "cli/opened_archive.h"
#include "cli/output.h"
#include "cli/report_jit.h"
#include "cli/report_run.h"
#include "cli/run_options.h"
#include "cli/staged_stamp.h"
#include "base/error.h"
#include "core/extra.h"
#include "core/signing_embedded.h"
#include "core/file_edit.h"
#include "contract/host_value.h"
#include "core/input_values.h"
#include "contract/jit.h"
#include "core/producer_info.h"
#include "contract/torch_backend.h"
#include "core/verify.h"
#include "cli/worker_options.h"

namespace tsarchive::cli {
namespace {

// torch::jit::save names the archive's top folder after the file's stem, as
// Python's torch.jit.save does: deploy.pt -> deploy/.
std::string stem_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

}  // namespace

void add_convert_options(CLI::App& app, ConvertOptions& opts, Context& ctx) {
  app.add_option("model", opts.model, "TorchScript archive (.pt) to read; it is never changed")->required();
  app.add_option("-o,--output", opts.output, "Where to write the new archive (.pt, or .ptl for the lite interpreter)")
      ->required();
  app.add_option("-m,--method", opts.method, "Method to convert and check (default: forward)");
  app.add_option("-i,--input", opts.inputs,
                 "A check input as for 'tsarchive run': SHAPE[:DTYPE[:FILL]], @x.npy, @x.pt, json:... (repeat)");
  app.add_option("--seed", opts.seed, "Seed of generated inputs (default: 0; same values as Python's torch.manual_seed)");
  app.add_option("--atol", opts.atol, "Absolute tolerance against the original (default 1e-5); PATH=A for one output");
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
}

namespace {

// What the options ask, checked before the archive is opened.
ConvertRequest request_from_options(const ConvertOptions& opts, const char* command) {
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

  ConvertRequest request;
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
  for (const std::string& text : opts.inputs) source.inputs.push_back(parse_input_argument(text));
  apply_tolerances(opts.atol, "--atol", source);
  apply_tolerances(opts.rtol, "--rtol", source);
  return request;
}

// Whether the new archive may be written: the checks against the original,
// then the dropped-methods policy. Sets outcome.failure (empty: write it) and
// returns the hint for a failure.
std::string judge_conversion(const ConvertOptions& opts, ConvertReport& report, ConvertOutcome& outcome) {
  outcome.failure = convert_failure(report, opts.strict);
  std::string failure_hint = "leave out --strict to write it with the warning";
  for (const OutputCheck& c : report.checks) {
    if (c.passed) continue;
    failure_hint = failed_check_hint(c);
    break;
  }
  if (!outcome.failure.empty() || report.dropped_methods.empty()) return failure_hint;
  std::string names;
  for (const std::string& m : report.dropped_methods) names += (names.empty() ? "" : ", ") + m;
  const std::string why = opts.trace ? "a trace records only '" + report.method + "'" : "a conversion step dropped them";
  if (opts.allow_drop) {
    report.notes.push_back("the written archive lacks the original's method(s) " + names + " (" + why +
                           "); --allow-drop let it be written without them");
    return failure_hint;
  }
  outcome.failure = "the written archive would lack the original's method(s) " + names + " (" + why + ")";
  return opts.trace ? "convert the scripted archive without tracing to keep them, or pass --allow-drop to "
                      "write the trace without them"
                    : "pass --allow-drop to write it without them";
}

// Extra files are not the module's: libtorch's save writes only the stamp.
// Every other extra file of the original goes into the new archive as it
// was (after the save, by the core); a stamp of ours is replaced by the new
// one, a producer's own producer_info.json is kept and the stamp goes beside it.
void write_converted(const ConvertOptions& opts, OpenedArchive& opened, const StampPlace& place,
                     const std::string& staged, StampContent content, ConvertReport& report, ConvertOutcome& outcome) {
  const TorchArchive& archive = opened.archive();
  StagedExtras extras;
  if (place.producer != nullptr) extras.stamp_name = kStampAltName;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Extra || &r == place.stamp) continue;
    extras.carried.push_back(ExtraEdit{r.extra_name(), archive.read(r, ExtraLimits::kValueForced), true});
    outcome.carried.push_back(r.extra_name());
  }
  if (place.stamp != nullptr) {
    report.notes.push_back("the original's stamp (" + place.stamp->name + ") is not carried over: the new archive has "
                           "its own, naming what was done; the original keeps its stamp");
  }
  if (place.producer != nullptr) {
    report.notes.push_back(extra_record_name(kStampName) + " is the producer's own and was kept as it is; the "
                           "stamp went to " + kStampAltRecord);
  }
  if (std::string note = stale_signature_note(archive, opts.output, "a new archive, with other records"); !note.empty()) {
    report.notes.push_back(std::move(note));
  }
  content.fields["conversion"] = steps_text(report.steps);
  const StagedStamp written =
      write_staged_with_stamp(opened.file(), staged, content, opts.output, stem_of(opts.output), opts.model, extras);
  outcome.written = true;
  outcome.size = written.result.size;
  outcome.stamp_record = extra_record_name(extras.stamp_name);
}

}  // namespace

int run_convert_flow(const ConvertOptions& opts, Context& ctx) {
  const char* command = opts.trace ? "trace" : "convert";
  ConvertRequest request = request_from_options(opts, command);
  OpenedArchive opened(opts.model, FileAccess::Read, kReaderLockTimeout, std::string("cannot ") + command + " this file",
                       ctx);
  const CheckedArchive checked = pass_gate(opened, opts.worker, "nothing was written", ctx.err);
  if (checked.archive().kind() == FileKind::LiteInterpreter) {
    throw_bad_input("a lite-interpreter archive holds bytecode, not TorchScript to " + std::string(command), opts.model,
                    std::string(command) + " the .pt it was made from");
  }
  request.source.archive = checked.libtorch_path();

  StampContent content;
  content.producer_version = build_info().version;
  ContextOptions context_options;
  context_options.host = !opts.no_host;
  context_options.git = !opts.no_git;
  content.context = collect_producer_context(context_options);
  content.method = "export-hook";

  const StagingFolder stage(opts.output, checked.size());
  request.output = stage.path() + "/" + stem_of(opts.output) + (request.lite ? ".ptl" : ".pt");
  WorkerJob job = worker_job(opts.worker, checked, opts.trace ? "tracing" : "converting", ctx.err);
  job.writable = {stage.path()};  // where libtorch saves the new archive
  ConvertReport report = in_worker<ConvertReport>(job, [&](TorchBackend& torch) {
    content.libtorch_version = torch.runtime_info().libtorch_version;
    request.stamp = render_stamp(content);  // what the hook writes: everything but the digests
    return torch.convert(request);
  });
  content.libtorch_version = report.libtorch_version;

  ConvertOutcome outcome;
  outcome.command = command;
  outcome.file = opts.model;
  outcome.output = opts.output;
  const std::string failure_hint = judge_conversion(opts, report, outcome);
  if (outcome.failure.empty()) {
    write_converted(opts, opened, locate_stamp(checked.archive()), request.output, content, report, outcome);
  }
  if (opts.json) {
    ctx.out << json_text(convert_to_json(report, outcome)) << '\n';
  } else {
    write_text(ctx.out, [&](std::ostream& text) { render_convert_text(report, outcome, text); });
  }
  for (const TraceWarning& w : report.warnings) print_warning(ctx.err, w.message, opts.model);
  for (const std::string& note : report.notes) print_note(ctx.err, note);
  if (!outcome.failure.empty()) {
    print_error(ctx.err, Error(ErrorKind::CheckFailed, outcome.failure, opts.model, "nothing was written; " + failure_hint));
    return static_cast<int>(ErrorKind::CheckFailed);
  }
  return 0;
}

}  // namespace tsarchive::cli
