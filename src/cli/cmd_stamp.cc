// tsarchive stamp MODEL [-o OUT] [--field KEY=VALUE]... [--no-host] [--no-git] [--keep-bytes] [--json]
//   [--sign-key PRIVATE.pem [--key-password-file F]]
//
// Two ways to write extra/producer_info.json (producer_info.h):
// - default: libtorch loads the module and saves it again while the export
//   hook supplies the stamp (the mechanism of PyTorch's deployment note). The
//   copy is staged next to the output, loaded back and compared with the
//   original (parameters, buffers, extra files); then the record digests of
//   the copy, known only once it is written, are put into its stamp through
//   the alignment-keeping extra/ writer, and it replaces the output.
// - --keep-bytes (and lite-interpreter archives, which a re-save would turn
//   into full ones, and archives with records a re-save would not write
//   again, e.g. traced_inputs): the stamp goes in through the extra/ writer
//   alone; every other record stays byte-identical and libtorch is never loaded.
// Either way the archive must pass the structural checks first (the gate,
// core/checked_archive.h): stamping a damaged archive would bless the damage.
// --sign-key also signs the stamped archive (core/signing_embedded.h): the
// signature goes in with the stamp, in the same write.
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/build_info.h"
#include "cli/commands.h"
#include "cli/many_files.h"
#include "cli/opened_archive.h"
#include "cli/output.h"
#include "cli/report_verify.h"
#include "cli/staged_stamp.h"
#include "base/bounded_json.h"
#include "base/error.h"
#include "core/checked_archive.h"
#include "core/extra.h"
#include "core/file_edit.h"
#include "core/output_paths.h"
#include "core/producer_info.h"
#include "core/signing_embedded.h"
#include "contract/torch_backend.h"
#include "core/verify.h"
#include "cli/worker_options.h"

namespace tsarchive::cli {
namespace {

constexpr const char* kRefusal = "cannot stamp this file";

struct StampOptions {
  std::vector<std::string> models;
  std::string model;  // the one being stamped
  std::string output;
  std::vector<std::string> fields;
  bool no_host = false;
  bool no_git = false;
  bool keep_bytes = false;
  bool json = false;
  double lock_timeout = 10;
  std::string sign_key, key_password_file;
  std::optional<SignerKeys> signer;  // read from sign_key once
  WorkerOptions worker;
};

std::map<std::string, std::string> parse_fields(const std::vector<std::string>& fields) {
  std::map<std::string, std::string> out;
  for (const std::string& f : fields) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos) throw_usage("--field '" + f.substr(0, 80) + "' is not KEY=VALUE");
    const std::string key = f.substr(0, eq);
    if (auto problem = stamp_field_problem(key)) {
      throw_usage("--field " + key.substr(0, 80) + ": " + *problem, "choose another key, e.g. --field team=vision");
    }
    if (!out.emplace(key, f.substr(eq + 1)).second) throw_usage("--field " + key + " is given twice");
  }
  return out;
}

struct Written {
  WriteResult result;
  std::string stamp;
  std::optional<int64_t> format_version;  // of what was written
  std::string signer;  // --sign-key: who signed
};

// `records`: the archive's digests, which --sign-key signs with the stamp in place.
void write_stamp(ArchiveFile& file, const TorchArchive& archive, const StampPlace& place,
                 const std::vector<RecordDigest>& records, const StampOptions& opts, Written& written) {
  std::vector<ExtraEdit> edits = {ExtraEdit{place.name(), written.stamp}};
  // A stamp of ours left at the other name (its producer's file since removed) goes.
  if (place.stamp != nullptr && place.stamp->name != place.record()) edits.push_back(ExtraEdit{place.stamp->extra_name(), {}});
  if (opts.signer) {
    EmbeddedSignature signature = sign_archive_records(records, edits, archive.top_folder(), *opts.signer, opts.model);
    written.signer = signature.signed_records.signer;
    edits.push_back(std::move(signature.edit));
  }
  const ExtraEditPlan plan = plan_extra_edits(archive, edits, false);
  written.result = opts.output.empty() ? file.replace(plan.zip) : file.write_new(plan.zip, opts.output);
}

// Through libtorch and its export hook; see the top of this file.
Written stamp_by_resave(ArchiveFile& file, const CheckedArchive& checked, const StampPlace& place, StampContent content,
                        const StampOptions& opts, std::ostream& err) {
  const TorchArchive& archive = checked.archive();
  const std::string& top = archive.top_folder();
  if (top == "." || top == ".." || top.size() > 200) {
    throw_bad_input("libtorch cannot save an archive whose top folder is '" + top.substr(0, 40) + "'", opts.model,
                    "use --keep-bytes");
  }
  content.method = "export-hook";

  const StagingFolder stage(opts.output.empty() ? opts.model : opts.output, archive.zip().source().size());
  ResaveRequest request;
  request.input = checked.libtorch_path();
  request.display_name = opts.model;
  request.output = stage.path() + "/" + top + ".pt";  // torch::jit::save names the top folder after the stem
  // Every extra file but our stamp goes through the save; a producer's own
  // producer_info.json among them, so the hook (which would write that name)
  // is not installed then, and the stamp goes in beside it afterwards.
  for (const Record& r : archive.records()) {
    if (r.kind == RecordKind::Extra && &r != place.stamp) request.extra_names.push_back(r.extra_name());
  }
  WorkerJob job = worker_job(opts.worker, checked, "re-saving the module", err);
  job.writable = {stage.path()};  // where libtorch saves the copy
  content.libtorch_version = in_worker<std::string>(job, [&](TorchBackend& torch) {
    content.libtorch_version = torch.runtime_info().libtorch_version;
    // What the hook writes: everything but the digests (empty: no hook).
    request.stamp = place.producer != nullptr ? std::string() : render_stamp(content);
    torch.resave_with_stamp(request);       // and loads the copy back to compare
    return content.libtorch_version;
  });

  StagedExtras extras;
  extras.stamp_name = place.producer != nullptr ? kStampAltName : kStampName;
  if (opts.signer) extras.sign = &*opts.signer;
  const StagedStamp staged = write_staged_with_stamp(file, request.output, content, opts.output, top, opts.model, extras);
  return Written{staged.result, staged.stamp, staged.format_version, staged.signer};
}

// Why this archive is stamped with --keep-bytes although the user did not ask:
// a note saying so, or empty when a re-save can stamp it. Before the gate:
// what the kind of file decides.
std::string keep_bytes_for_kind(FileKind kind) {
  if (kind == FileKind::LiteInterpreter) {
    return "lite-interpreter archive: stamped with --keep-bytes (a libtorch re-save would drop its bytecode)";
  }
  // The export hook is TorchScript's save: the core writes a .pt2's stamp,
  // as an extra file, the way `extra set` would.
  if (kind == FileKind::ExportedProgram) {
    return ".pt2 archive: stamped with --keep-bytes (libtorch's export hook is TorchScript's)";
  }
  return {};
}

// After the gate: what the archive holds decides.
std::string keep_bytes_for_contents(const TorchArchive& archive, const VerifyReport& gate) {
  // Written by a newer PyTorch than the linked libtorch: a re-save would at best
  // rewrite it in an older libtorch's conventions; stamp its bytes as they are.
  const std::string libtorch = build_info().torch_version;
  if (!gate.unreadable.empty()) {
    return gate.unreadable.front() + ": stamped with --keep-bytes (libtorch " + libtorch + " cannot re-save it)";
  }
  // Before the markers below: PyTorch 2.0 wrote traced_inputs without them,
  // and a re-save would lose those records while its copy verifies intact.
  if (const std::vector<std::string> dropped = records_a_resave_drops(archive); !dropped.empty()) {
    std::string names;
    for (size_t i = 0; i < dropped.size() && i < 3; ++i) names += (i ? ", " : "") + dropped[i];
    if (dropped.size() > 3) names += " and " + std::to_string(dropped.size() - 3) + " more";
    return "it has records a libtorch re-save does not write (" + names + "): stamped with --keep-bytes, which keeps them";
  }
  if (const std::string marker = pytorch2_record(archive); !marker.empty() && libtorch.rfind("1.", 0) == 0) {
    return "written by PyTorch 2.x (it has " + marker + "), newer than libtorch " + libtorch +
           ": stamped with --keep-bytes (a re-save would rewrite it as libtorch " + libtorch + " does)";
  }
  return {};
}

// The stamp over the archive's own bytes: its records' digests, written by the core.
// `gate` holds SHA-256 digests when it was made with VerifyOptions::digests.
Written stamp_keeping_bytes(ArchiveFile& file, const TorchArchive& archive, const StampPlace& place,
                            StampContent content, const VerifyReport& gate, bool hashed, const StampOptions& opts) {
  content.method = "keep-bytes";
  content.format_version = gate.format_version;  // a re-save's own is taken from the copy
  const std::vector<RecordDigest> digests = hashed ? gate.records : digest_records(archive);
  std::vector<RecordDigest> records;
  for (const RecordDigest& d : digests) {
    if (place.stamp == nullptr || d.name != place.stamp->name) records.push_back(d);
  }
  content.digests = digests_without_stamp(records, opts.model, place.record());
  Written written;
  written.stamp = render_stamp(content);
  write_stamp(file, archive, place, digests, opts, written);
  written.format_version = gate.format_version;
  return written;
}

struct StampOutcome {
  bool keep_bytes = false;
  std::string stamp_record;
  bool replaced_previous = false, producer_kept = false;
  std::optional<int64_t> version_before;
  std::vector<std::string> notes;
};

void print_stamp_report(const StampOptions& opts, const StampOutcome& outcome, const Written& written, Context& ctx) {
  const ParsedStamp stamp = parse_stamp(written.stamp, opts.model);
  const std::string& output = opts.output.empty() ? opts.model : opts.output;
  // A re-save writes the linked libtorch's conventions: older archives come
  // back with a higher format version, which older readers refuse.
  const std::optional<int64_t>& before = outcome.version_before;
  const bool raised = before && written.format_version && *written.format_version > *before;
  std::string raised_line;
  if (raised) {
    raised_line = "the re-save raised the format version from " + std::to_string(*before) + " to " +
                  std::to_string(*written.format_version) + ": readers now need a libtorch that reads format version " +
                  std::to_string(*written.format_version) + " (use --keep-bytes to keep " + std::to_string(*before) + ")";
  }
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.stamp/1"}, {"file", opts.model}, {"output", output},
                                  {"method", outcome.keep_bytes ? "keep-bytes" : "export-hook"},
                                  {"replaced_previous", outcome.replaced_previous},
                                  {"stamp_record", outcome.stamp_record},
                                  {"producer_info_kept", outcome.producer_kept},
                                  {"size", written.result.size}};
    const auto version_json = [](const std::optional<int64_t>& v) {
      return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
    };
    doc["format_version"] = {{"before", version_json(before)}, {"after", version_json(written.format_version)},
                             {"raised", raised}};
    if (raised) doc["format_version"]["note"] = raised_line;
    doc["notes"] = outcome.notes;
    doc["signature"] = written.signer.empty() ? nlohmann::ordered_json()
                                              : nlohmann::ordered_json{{"record", kEmbeddedSignatureRecord},
                                                                       {"signer", written.signer}};
    if (auto parsed = parse_bounded_json<nlohmann::ordered_json>(written.stamp)) doc["stamp"] = std::move(*parsed);
    ctx.out << json_text(doc, ctx.json_indent) << '\n';
    return;
  }
  ctx.out << "stamped " << shown(output) << " ("
          << (outcome.keep_bytes ? "keep-bytes" : "libtorch re-save with the export hook") << "): "
          << stamp.digests.size() + 1 << " records (the stamp and the " << stamp.digests.size()
          << " it digests), root " << stamp.root.substr(0, 16) << "...\n";  // verify counts the stamp too
  if (outcome.stamp_record != kStampRecord) {
    ctx.out << "  stamp in " << outcome.stamp_record << ": extra/" << kStampName
            << " is the producer's own and was kept as it is\n";
  }
  if (outcome.replaced_previous) ctx.out << "  replaced the previous stamp (its digest is kept under \"previous\")\n";
  if (raised) ctx.out << "  " << raised_line << '\n';
  if (!written.signer.empty()) {
    ctx.out << "  signed as " << shown(written.signer) << " (embedded: " << kEmbeddedSignatureRecord << ")\n";
  }
}

int run_stamp(const StampOptions& opts, Context& ctx) {
  if (is_standard_stream(opts.output)) {
    throw_usage("stamp cannot write to standard output (-o -): libtorch's re-save and the stamp are checked in a file",
                "write to a file with -o FILE, then pipe that");
  }
  check_output_paths({{"-o", opts.output}}, {{"the model", opts.model}, {"--sign-key", opts.sign_key}});
  StampContent content;
  content.fields = parse_fields(opts.fields);
  content.producer_version = build_info().version;
  ContextOptions context_options;
  context_options.host = !opts.no_host;
  context_options.git = !opts.no_git;
  content.context = collect_producer_context(context_options);

  OpenedArchive opened(opts.model, opts.output.empty() ? FileAccess::Edit : FileAccess::Read, opts.lock_timeout, kRefusal,
                       ctx, true);
  ArchiveFile& file = opened.file();
  const TorchArchive& archive = opened.archive();
  bool keep_bytes = opts.keep_bytes;
  if (std::string why = keep_bytes ? std::string() : keep_bytes_for_kind(archive.kind()); !why.empty()) {
    keep_bytes = true;
    content.context.notes.push_back(std::move(why));
  }
  // Keeping the bytes stamps this file's digests; a re-save stamps its copy's,
  // and this file needs only the structural checks before libtorch reads it.
  VerifyOptions gate_options;
  gate_options.digests = keep_bytes;
  if (!keep_bytes) gate_options.readable = built_libtorch_versions();  // libtorch must read what it re-saves
  const VerifyReport gate = verify_archive(archive, gate_options);
  refuse_damage(gate, opts.model, "nothing was written");
  if (std::string why = keep_bytes ? std::string() : keep_bytes_for_contents(archive, gate); !why.empty()) {
    keep_bytes = true;
    content.context.notes.push_back(std::move(why));
  }

  content.archive_name = archive.top_folder();
  const StampPlace place = locate_stamp(archive);
  if (place.stamp != nullptr) content.previous = archive.read(*place.stamp, 16ull << 20);
  StampOutcome outcome{keep_bytes,
                       keep_bytes ? place.record() : place.producer != nullptr ? kStampAltRecord : kStampRecord,
                       content.previous.has_value(), place.producer != nullptr, gate.format_version,
                       content.context.notes};
  const Written written =
      keep_bytes ? stamp_keeping_bytes(file, archive, place, content, gate, gate_options.digests, opts)
                 : stamp_by_resave(file, admit_verified(file, archive, gate, "nothing was written"), place, content, opts,
                                   ctx.err);
  if (!opts.signer) {
    const std::string result = opts.output.empty() ? opts.model : opts.output;
    if (std::string note = stale_signature_note(archive, result, "the stamp changed"); !note.empty()) {
      outcome.notes.push_back(std::move(note));
    }
  }
  for (const std::string& note : outcome.notes) print_note(ctx.err, note);
  print_stamp_report(opts, outcome, written, ctx);
  return 0;
}

}  // namespace

Runner setup_stamp(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<StampOptions>();
  app.description(
      "Write extra/producer_info.json: who and what produced the archive (tool, libtorch, git commit, CI run,\n"
      "host), when (SOURCE_DATE_EPOCH honoured), and the SHA-256 of every record, for 'tsarchive verify'.\n"
      "By default libtorch re-saves the module with the stamp supplied by its export hook, and the copy is\n"
      "loaded back and compared before it replaces anything. --keep-bytes adds the stamp without libtorch,\n"
      "keeping every other record byte-identical; archives from a newer PyTorch than the linked libtorch, and\n"
      ".ptl and .pt2 files, are always stamped that way (with a note). A re-save that raises the format version\n"
      "says so.");
  app.add_option("model", opts->models,
                 "Archives to stamp (.pt; .ptl and .pt2 are stamped with --keep-bytes); - reads stdin, with -o")
      ->required();
  app.add_option("-o,--output", opts->output, "Write the stamped archive here instead of replacing MODEL");
  app.add_option("--field", opts->fields, "Add a string field KEY=VALUE to the stamp (repeatable)");
  app.add_flag("--no-host", opts->no_host, "Leave out the host name and user");
  app.add_flag("--no-git", opts->no_git, "Leave out the git checkout of the working directory");
  app.add_flag("--keep-bytes", opts->keep_bytes,
               "Add the stamp without loading libtorch; every other record stays byte-identical");
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.stamp/1) with the stamp written; JSON Lines for several");
  app.add_option("--lock-timeout", opts->lock_timeout, "Seconds to wait for another editor (default 10)")
      ->check(CLI::Range(0.0, 86400.0));
  CLI::Option* sign_key = app.add_option("--sign-key", opts->sign_key,
                 "Also sign the stamped archive with this private key, in the same write (as sign --embed does)")
      ->type_name("PRIVATE.pem");
  app.add_option("--key-password-file", opts->key_password_file, "The --sign-key's password file (its first line)")
      ->type_name("FILE")
      ->needs(sign_key);
  add_worker_options(app, opts->worker, false, "For the re-save: ");  // a stamp vouches for checked records only
  return [opts, &ctx] {
    // The key is read once, before any archive: a wrong one fails before anything is written.
    if (!opts->sign_key.empty()) opts->signer = read_signer_keys(opts->sign_key, opts->key_password_file, "", {});
    if (opts->models.size() > 1 && !opts->output.empty()) {
      throw_usage("-o names one output; " + std::to_string(opts->models.size()) + " archives were given",
                  "stamp them in place, or one at a time with -o");
    }
    return for_each_file(opts->models, opts->json, ctx, [&](const std::string& model) {
      opts->model = model;
      return run_stamp(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli
