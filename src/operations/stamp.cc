#include "operations/stamp.h"

#include <optional>
#include <string>
#include <vector>

#include "base/build_info.h"
#include "base/error.h"
#include "base/strings.h"
#include "contract/torch_backend.h"
#include "core/provenance/checked_archive.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/provenance/producer_info.h"
#include "core/provenance/signing_embedded.h"
#include "core/provenance/verify.h"
#include "format/byte_source.h"
#include "operations/gate.h"
#include "operations/opened_archive.h"
#include "operations/staged_save.h"

namespace tsarchive {
namespace {

constexpr const char* kRefusal = "cannot stamp this file";
// --in-place rewrites at most this many bytes of the existing file, as extra set --in-place.
constexpr uint64_t kInPlaceLimit = 64ull << 20;

struct Written {
  WriteResult result;
  std::string stamp;
  std::optional<int64_t> format_version;  // of what was written
  std::string signer;  // --sign-key: who signed
};

// `records`: the archive's digests, which --sign-key signs with the stamp in place.
void write_stamp(ArchiveFile& file, const TorchArchive& archive, const StampPlace& place,
                 const std::vector<RecordDigest>& records, const StampSettings& opts, Written& written) {
  std::vector<ExtraEdit> edits = {ExtraEdit{place.name(), written.stamp}};
  // A stamp of ours left at the other name (its producer's file since removed) goes.
  if (place.stamp != nullptr && place.stamp->name != place.record()) edits.push_back(ExtraEdit{place.stamp->extra_name(), {}});
  if (opts.signer != nullptr) {
    EmbeddedSignature signature = sign_archive_records(records, edits, archive.top_folder(), *opts.signer, opts.model);
    written.signer = signature.signed_records.signer;
    edits.push_back(std::move(signature.edit));
  }
  const ExtraEditPlan plan = plan_extra_edits(archive, edits, false);
  if (!opts.output.empty()) {
    written.result = file.write_new(plan.zip, opts.output);
  } else if (opts.in_place) {
    written.result = file.write_in_place(plan.zip, kInPlaceLimit);
  } else {
    written.result = file.replace(plan.zip);
  }
}

// Through libtorch and its export hook; see the top of this file. Nothing is
// written, and `lacking` names them, when the copy lacks records the archive
// has (what records_a_resave_drops did not foresee): the caller keeps the bytes.
Written stamp_by_resave(ArchiveFile& file, const CheckedArchive& checked, const StampPlace& place, StampContent content,
                        const StampSettings& opts, const NoteSink& notes, std::vector<std::string>& lacking) {
  const TorchArchive& archive = checked.archive();
  const std::string& top = archive.top_folder();
  if (top == "." || top == ".." || top.size() > 200) {
    throw_bad_input("libtorch cannot save an archive whose top folder is '" + top.substr(0, 40) + "'", opts.model,
                    "use --keep-bytes");
  }
  content.method = "export-hook";

  const StagingFolder stage(opts.output.empty() ? opts.model : opts.output, resaved_size(archive));
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
  WorkerJob job = worker_job(opts.worker, checked, "re-saving the module", notes);
  job.writable = {stage.path()};  // where libtorch saves the copy
  content.libtorch_version = in_worker<std::string>(job, [&](TorchBackend& torch) {
    content.libtorch_version = torch.runtime_info().libtorch_version;
    // What the hook writes: everything but the digests (empty: no hook).
    if (place.producer == nullptr) request.stamp = render_hook_stamp(content, archive);
    torch.resave_with_stamp(request);       // and loads the copy back to compare
    return content.libtorch_version;
  });
  lacking = records_the_copy_lacks(archive, TorchArchive(open_file_source(request.output)));
  if (!lacking.empty()) return {};

  StagedExtras extras;
  extras.stamp_name = place.producer != nullptr ? kStampAltName : kStampName;
  extras.sign = opts.signer;
  extras.judged_as = &opts.worker;
  extras.tensors_of = &archive;
  extras.kept.emplace();
  if (!request.extra_names.empty()) {
    DigestOptions extra_files;
    extra_files.kinds = {RecordKind::Extra};
    if (place.stamp != nullptr) extra_files.exclude = {place.stamp->name};
    for (const RecordDigest& d : digest_records(archive, extra_files)) extras.kept->emplace_back(d.name, d.sha256);
  }
  const StagedStamp staged = write_staged_with_stamp(file, request.output, content, opts.output, top, opts.model, std::move(extras));
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
    return "it has records a libtorch re-save does not write (" + some_names(dropped, 3) +
           "): stamped with --keep-bytes, which keeps them";
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
                            StampContent content, const VerifyReport& gate, bool hashed, const StampSettings& opts) {
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

}  // namespace

StampResult stamp_archive(const StampSettings& opts, const NoteSink& notes) {
  StampContent content;
  content.fields = opts.fields;
  content.producer_version = build_info().version;
  ContextOptions context_options;
  context_options.host = opts.host;
  context_options.git = opts.git;
  content.context = collect_producer_context(context_options);

  if (opts.in_place && (!opts.keep_bytes || !opts.output.empty())) {
    throw_usage("--in-place rewrites the end of the model itself: it needs --keep-bytes and no -o");
  }
  const FileAccess access = !opts.output.empty() ? FileAccess::Read
                            : opts.in_place      ? FileAccess::EditInPlace
                                                 : FileAccess::Edit;
  OpenedArchive opened(opts.model, access, opts.lock_timeout, kRefusal, notes, true);
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
  StampResult result;
  result.keep_bytes = keep_bytes;
  result.stamp_record = keep_bytes ? place.record() : place.producer != nullptr ? kStampAltRecord : kStampRecord;
  result.replaced_previous = content.previous.has_value();
  result.producer_kept = place.producer != nullptr;
  result.version_before = gate.format_version;
  result.notes = content.context.notes;
  if (!keep_bytes) refuse_unsafe_load(archive, file.path(), opts.worker, "nothing was written");  // libtorch loads it
  std::vector<std::string> lacking;
  Written written =
      keep_bytes ? stamp_keeping_bytes(file, archive, place, content, gate, gate_options.digests, opts)
                 : stamp_by_resave(file, admit_verified(file, archive, gate, "nothing was written"), place, content, opts,
                                   notes, lacking);
  if (!lacking.empty()) {
    std::string why = "libtorch's re-save lacks records the archive has (" + some_names(lacking, 3) +
                      "): stamped with --keep-bytes, which keeps them";
    content.context.notes.push_back(why);
    result.notes.push_back(std::move(why));
    result.keep_bytes = true;
    result.stamp_record = place.record();
    written = stamp_keeping_bytes(file, archive, place, content, gate, gate_options.digests, opts);
  }
  if (opts.signer == nullptr) {
    const std::string stamped = opts.output.empty() ? opts.model : opts.output;
    if (std::string note = stale_signature_note(archive, stamped, "the stamp changed"); !note.empty()) {
      result.notes.push_back(std::move(note));
    }
  }
  result.notes.insert(result.notes.end(), written.result.notes.begin(), written.result.notes.end());
  result.signer = written.signer;
  result.stamp = written.stamp;
  result.size = written.result.size;
  result.version_after = written.format_version;
  return result;
}

}  // namespace tsarchive
