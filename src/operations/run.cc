#include "operations/run.h"

#include "base/build_info.h"
#include "base/error.h"
#include "base/strings.h"
#include "contract/torch_backend.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/provenance/producer_info.h"
#include "core/inputs/aoti_model.h"
#include "core/inputs/input_values.h"
#include "core/inputs/run_check.h"
#include "core/provenance/signing_embedded.h"
#include "operations/gate.h"
#include "operations/opened_archive.h"

namespace tsarchive {
namespace {

// Writes the check; returns how its inputs and outputs are stored. What
// replacing the archive did beside it goes to report.notes.
RunCheckEncoding record_check(ArchiveFile& file, const TorchArchive& archive, RunReport& report,
                              const RunRequest& request) {
  RunCheck check;
  check.method = report.method;
  check.tolerance = request.tolerance;
  check.tolerance_by_path = request.tolerance_by_path;
  check.device = report.device;
  check.libtorch = report.libtorch_version;
  check.producer = std::string("tsarchive ") + build_info().version;
  ContextOptions context;
  context.host = context.git = false;
  check.created_at = collect_producer_context(context).created_at;
  for (const ValueSummary& v : report.inputs) {
    if (v.depth == 0) check.inputs.push_back(value_line(v));
  }
  for (const ValueSummary& v : report.outputs) {
    if (v.depth == 0 || v.tensor) check.outputs.push_back(value_line(v));
  }
  check.encoding = run_check_encoding_for(archive.kind());  // base64 text in a .pt2 (run_check.h)
  const WriteResult written =
      file.replace(plan_extra_edits(archive, run_check_edits(check, report.saved_inputs, report.saved_outputs), false).zip);
  report.notes.insert(report.notes.end(), written.notes.begin(), written.notes.end());
  return check.encoding;
}

// A .pt2: the AOTInductor model to run (--method names it, or the recorded
// check), checked against --device, and with --sample-inputs the package's own
// inputs. An ExportedProgram without compiled artifacts is refused here.
void complete_pt2(const RunSettings& opts, const CheckedArchive& checked, RunRequest& request, InputBudget& budget) {
  const Pt2Contents contents = read_pt2(checked.archive());
  const Pt2RunTarget target = select_aoti_model(contents, opts.check ? request.method : opts.method, opts.model);
  check_aoti_device(target, opts.request.device, opts.model);
  check_aoti_host(target, opts.model);
  request.aoti_model = request.method = target.model;
  if (opts.sample_inputs) request.inputs = {read_pt2_sample_inputs(checked.archive(), contents, target.model, opts.model, budget)};
}

// What the archive adds: its kind, and with --check the recorded inputs,
// expected outputs, method and tolerances (unless given on the command line).
void complete_from_archive(const RunSettings& opts, const CheckedArchive& checked, RunRequest& request) {
  const FileKind kind = checked.archive().kind();
  request.lite = kind == FileKind::LiteInterpreter;
  request.archive = checked.libtorch_path();
  if (opts.sample_inputs && kind != FileKind::ExportedProgram) {
    throw_usage("--sample-inputs takes a .pt2 package's own inputs (data/sample_inputs/); " + opts.model + " has none",
                "give the inputs with --input");
  }
  // What the archive holds for the run is held to the limit --input is held to.
  InputBudget budget = input_budget(opts.worker);
  if (opts.check) {
    const RunCheck recorded = load_recorded_check(checked.archive(), request, opts.model, budget);
    if (!opts.method.empty() && opts.method != recorded.method) {
      throw_usage("--method " + opts.method + " differs from the recorded check's method " + recorded.method);
    }
    if (!opts.tolerances_given) {
      request.tolerance = recorded.tolerance;
      request.tolerance_by_path = recorded.tolerance_by_path;
    }
  }
  if (kind == FileKind::ExportedProgram) complete_pt2(opts, checked, request, budget);
}

// --record: stores the run as the archive's self-check when it passed, and
// says so (and that a stamp no longer covers the archive).
void record_if_passed(const RunSettings& opts, const RunVerdict& verdict, OpenedArchive& opened,
                      const RunRequest& request, RunReport& report) {
  if (!verdict.passed(report)) {
    report.notes.push_back("nothing was recorded: the run failed its checks");
    return;
  }
  const RunCheckEncoding encoding = record_check(opened.file(), opened.archive(), report, request);
  const RunCheckFiles files = run_check_files(encoding);
  const std::string as = encoding == RunCheckEncoding::Base64 ? " of torch.save, as base64 text" : "";
  report.notes.push_back("recorded this run's check in " + opts.model + ": extra/" + kRunCheckName + ", extra/" +
                         files.inputs + " (" + human_size(report.saved_inputs.size()) + as + "), extra/" +
                         files.outputs + " (" + human_size(report.saved_outputs.size()) + as +
                         "); replay with: tsarchive run " + opts.model + " --check");
  const StampPlace place = locate_stamp(opened.archive());
  if (place.stamp != nullptr) {
    report.notes.push_back("the stamp (" + place.stamp->name + ") no longer covers " + opts.model +
                           " ('verify' reports the recorded files as added or changed); run 'tsarchive stamp' "
                           "to stamp it again");
  }
  if (std::string note = stale_signature_note(opened.archive(), opts.model, "the run's check was recorded");
      !note.empty()) {
    report.notes.push_back(std::move(note));
  }
}

}  // namespace

RunResult run_archive(RunSettings settings, const NoteSink& notes) {
  RunRequest& request = settings.request;
  OpenedArchive opened(settings.model, settings.record ? FileAccess::Edit : FileAccess::Read, settings.lock_timeout,
                       "cannot run this file", notes, /*accept_pt2=*/true);
  const CheckedArchive checked = pass_gate(opened, settings.worker, "nothing was run", notes);
  complete_from_archive(settings, checked, request);

  WorkerJob job = worker_job(settings.worker, checked, "running " + request.method, notes);
  if (job.limits.time_s > 0) job.limits.time_s += request.duration_s;  // --duration is time the user asked for
  job.cuda = is_cuda_device(request.device);
  // Unpacked by libtorch into a /tmp folder reserved for it (sandbox.h).
  job.compiled_package = !request.aoti_model.empty();
  request.on_phase = [](const std::string& doing) { announce_worker_activity(doing); };  // "while preparing the inputs"
  RunResult result;
  result.report = in_worker<RunReport>(job, [&](TorchBackend& torch) { return torch.run(request); });
  result.top = finish_image_outputs(settings.images, result.report, request.save_outputs, opened.archive());
  if (settings.record) record_if_passed(settings, settings.verdict, opened, request, result.report);
  return result;
}

}  // namespace tsarchive
