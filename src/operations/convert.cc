#include "operations/convert.h"

#include "base/build_info.h"
#include "base/error.h"
#include "base/strings.h"
#include "contract/torch_backend.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/provenance/producer_info.h"
#include "core/inputs/run_check.h"
#include "core/provenance/signing_embedded.h"
#include "operations/gate.h"
#include "operations/opened_archive.h"
#include "operations/staged_save.h"

namespace tsarchive {

std::string stem_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

std::string steps_text(const std::vector<std::string>& steps) {
  std::string out;
  for (const std::string& s : steps) out += (out.empty() ? "" : " > ") + s;
  return out;
}

std::string convert_failure(const ConvertReport& report, bool strict) {
  for (const OutputCheck& c : report.checks) {
    if (!c.passed) return c.path + " of the written archive differs from the original's: " + check_text(c);
  }
  if (strict && !report.warnings.empty()) return "--strict: " + report.warnings.front().message;
  return {};
}

namespace {

// Whether the new archive may be written: the checks against the original,
// then the dropped-methods policy. Sets outcome.failure (empty: write it) and
// outcome.failure_hint.
void judge_conversion(const ConvertSettings& settings, ConvertReport& report, ConvertOutcome& outcome) {
  const bool trace = settings.request.trace;
  outcome.failure = convert_failure(report, settings.strict);
  outcome.failure_hint = "leave out --strict to write it with the warning";
  for (const OutputCheck& c : report.checks) {
    if (c.passed) continue;
    outcome.failure_hint = failed_check_hint(c);
    break;
  }
  if (!outcome.failure.empty() || report.dropped_methods.empty()) return;
  std::string names;
  for (const std::string& m : report.dropped_methods) names += (names.empty() ? "" : ", ") + m;
  const std::string why = trace ? "a trace records only '" + report.method + "'" : "a conversion step dropped them";
  if (settings.allow_drop) {
    report.notes.push_back("the written archive lacks the original's method(s) " + names + " (" + why +
                           "); --allow-drop let it be written without them");
    return;
  }
  outcome.failure = "the written archive would lack the original's method(s) " + names + " (" + why + ")";
  outcome.failure_hint = trace ? "convert the scripted archive without tracing to keep them, or pass --allow-drop to "
                                 "write the trace without them"
                               : "pass --allow-drop to write it without them";
}

// Extra files are not the module's: libtorch's save writes only the stamp.
// Every other extra file of the original goes into the new archive as it
// was (after the save, by the core); a stamp of ours is replaced by the new
// one, a producer's own producer_info.json is kept and the stamp goes beside it.
void write_converted(const ConvertSettings& settings, OpenedArchive& opened, const StampPlace& place,
                     StampContent content, ConvertReport& report, ConvertOutcome& outcome) {
  const TorchArchive& archive = opened.archive();
  StagedExtras extras;
  extras.judged_as = &settings.worker;
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
  if (std::string note = stale_signature_note(archive, settings.output, "a new archive, with other records");
      !note.empty()) {
    report.notes.push_back(std::move(note));
  }
  content.fields["conversion"] = steps_text(report.steps);
  outcome.stamp_record = extra_record_name(extras.stamp_name);
  const StagedStamp written = write_staged_with_stamp(opened.file(), settings.request.output, content, settings.output,
                                                      stem_of(settings.output), settings.model, std::move(extras));
  outcome.written = true;
  outcome.size = written.result.size;
}

// The extra files write_converted carries are held in memory whole until
// written, in this process, which no --memory-limit bounds: refused, before
// the worker runs, past the budget --input files have, by their declared
// sizes (an archive of a few MB may declare GBs of deflated zeros).
void check_carried_extras_fit(const ConvertSettings& settings, const TorchArchive& archive) {
  InputBudget held = input_budget(settings.worker,
                                  "the original's extra files are held in memory whole to carry them into the new "
                                  "archive; remove large ones with 'tsarchive extra rm' and set them again afterwards",
                                  "extra files");
  for (const Record& r : archive.records()) {
    if (r.kind == RecordKind::Extra) held.take(r.entry->uncompressed_size, "extra/" + r.extra_name(), settings.model);
  }
}

StampContent stamp_content(const ConvertSettings& settings) {
  StampContent content;
  content.producer_version = build_info().version;
  ContextOptions context_options;
  context_options.host = settings.host;
  context_options.git = settings.git;
  content.context = collect_producer_context(context_options);
  content.method = "export-hook";
  return content;
}

}  // namespace

ConvertResult convert_archive(ConvertSettings settings, const NoteSink& notes) {
  ConvertRequest& request = settings.request;
  const std::string command = request.trace ? "trace" : "convert";
  OpenedArchive opened(settings.model, FileAccess::Read, kReaderLockTimeout, "cannot " + command + " this file", notes);
  const CheckedArchive checked = pass_gate(opened, settings.worker, "nothing was written", notes);
  if (checked.archive().kind() == FileKind::LiteInterpreter) {
    throw_bad_input("a lite-interpreter archive holds bytecode, not TorchScript to " + command, settings.model,
                    command + " the .pt it was made from");
  }
  request.source.archive = checked.libtorch_path();
  check_carried_extras_fit(settings, checked.archive());

  StampContent content = stamp_content(settings);
  const StagingFolder stage(settings.output, resaved_size(checked.archive()));
  request.output = stage.path() + "/" + stem_of(settings.output) + (request.lite ? ".ptl" : ".pt");
  WorkerJob job = worker_job(settings.worker, checked, request.trace ? "tracing" : "converting", notes);
  job.writable = {stage.path()};  // where libtorch saves the new archive
  ConvertResult result;
  result.report = in_worker<ConvertReport>(job, [&](TorchBackend& torch) {
    content.libtorch_version = torch.runtime_info().libtorch_version;
    request.stamp = render_hook_stamp(content, checked.archive());  // everything but the digests
    return torch.convert(request);
  });
  content.libtorch_version = result.report.libtorch_version;

  ConvertOutcome& outcome = result.outcome;
  outcome.command = command;
  outcome.file = settings.model;
  outcome.output = settings.output;
  judge_conversion(settings, result.report, outcome);
  if (outcome.failure.empty()) {
    write_converted(settings, opened, locate_stamp(checked.archive()), content, result.report, outcome);
  }
  return result;
}

}  // namespace tsarchive
