#include "operations/staged_save.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>

#include "core/compare/diff.h"
#include "core/provenance/checked_archive.h"
#include "format/archive.h"
#include "base/error.h"
#include "core/edit/extra.h"
#include "core/provenance/signing_embedded.h"
#include "operations/gate.h"
#include "format/zip_writer.h"
#include "worker/sandbox.h"

namespace tsarchive {

std::vector<std::pair<std::string, std::string>> digests_without_stamp(const std::vector<RecordDigest>& records,
                                                                       const std::string& file,
                                                                       const std::string& stamp_record) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RecordDigest& d : records) {
    if (!d.problem.empty()) throw_bad_input("record '" + d.name + "': " + d.problem, file, "nothing was written");
    // An embedded signature covers the stamp, so the stamp leaves it out.
    if (d.name != stamp_record && d.name != kEmbeddedSignatureRecord) out.emplace_back(d.name, d.sha256);
  }
  return out;
}

namespace {

// Whether the copy libtorch wrote may itself become the archive, patched in
// place and renamed, instead of being copied: nothing but this process can
// still write it or reach it by another name, and it carries nothing the
// worker gave it besides its bytes (the mode and owner are set again).
bool copy_may_become_the_file(int fd) {
  const SandboxSupport& sandbox = sandbox_support();
  if (sandbox.disabled || !sandbox.seccomp) return false;  // a process the worker started may hold it open
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != ::geteuid()) return false;
  const ssize_t attributes = ::flistxattr(fd, nullptr, 0);
  return attributes == 0 || (attributes < 0 && errno == ENOTSUP);
}

// Error(Torch) naming the first extra file of `kept` that the copy lacks or
// holds changed, or one it holds besides them and `stamp_record`: data a user
// put in the archive is never dropped unnamed, and none is added unasked.
void refuse_other_extras(const TorchArchive& copy, const std::vector<RecordDigest>& digests,
                         const std::vector<std::pair<std::string, std::string>>& kept, const std::string& stamp_record,
                         const std::string& display) {
  const auto refuse = [&](const std::string& what) {
    throw Error(ErrorKind::Torch, "the archive libtorch re-saved " + what, display,
                "nothing was written; stamp it with --keep-bytes, which writes no copy");
  };
  std::map<std::string, const RecordDigest*> by_name;
  for (const RecordDigest& d : digests) by_name[d.name] = &d;
  std::map<std::string, std::string> expected(kept.begin(), kept.end());
  for (const auto& [name, sha256] : kept) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) refuse("lacks " + name + " of the original");
    if (found->second->sha256 != sha256) refuse("changed " + name + " of the original");
  }
  for (const Record& r : copy.records()) {
    if (r.kind == RecordKind::Extra && r.name != stamp_record && expected.count(r.name) == 0) {
      refuse("holds " + r.name + ", which the original does not");
    }
  }
}

// Error(Torch) unless the copy holds `original`'s tensors, path by path, with
// the same dtype, shape and values (diff.h: a layout that changes no value is
// the re-save's to choose), and no other: a copy whose weights the worker
// swapped, permuted between parameters or reshaped is not stamped.
void refuse_other_tensors(const TorchArchive& original, const TorchArchive& copy, const std::string& display) {
  DiffOptions options;
  options.code = false;
  options.ignore_extra = true;
  const ArchiveDiff diff = diff_archives(original, copy, options);
  std::string what;
  for (const TensorChange& t : diff.tensors) {
    if (t.change == Change::Added) {
      what = "holds a tensor the original does not (" + t.path + ")";
    } else if (t.change == Change::Removed) {
      what = "lacks the original's tensor " + t.path;
    } else if (t.dtype_changed || t.shape_changed) {
      what = "changed the dtype or shape of tensor " + t.path;
    } else if (!t.values.compared) {
      what = "holds tensor " + t.path + " in a form whose values could not be compared (" + t.values.note + ")";
    } else if (t.values.differing != 0) {
      what = "changed " + std::to_string(t.values.differing) + " values of tensor " + t.path;
    }
    if (!what.empty()) break;
  }
  if (what.empty() && diff.new_side.tensors != diff.old_side.tensors) {
    what = "holds " + std::to_string(diff.new_side.tensors) + " tensors where the original has " +
           std::to_string(diff.old_side.tensors);
  }
  if (what.empty()) return;
  throw Error(ErrorKind::Torch, "the archive libtorch re-saved " + what, display,
              "nothing was written; the model's code or a library it loaded changed its weights while it was saved: "
              "stamp it with --keep-bytes, which writes no copy");
}

}  // namespace

uint64_t resaved_size(const TorchArchive& archive) {
  uint64_t total = archive.zip().source().size();
  for (const ZipEntry& e : archive.zip().entries()) {
    if (e.uncompressed_size <= e.compressed_size) continue;
    const uint64_t grows = e.uncompressed_size - e.compressed_size;
    total = grows > UINT64_MAX - total ? UINT64_MAX : total + grows;
  }
  return total;
}

StagedStamp write_staged_with_stamp(ArchiveFile& file, const std::string& staged, StampContent content,
                                    const std::string& output, const std::string& expected_top, const std::string& display,
                                    StagedExtras extras) {
  struct stat st {};
  // Not through a link the worker left at that name: it would have us read,
  // patch and rename whatever file the link names.
  const int fd = open_regular_file(staged, O_RDWR | O_NOFOLLOW | O_CLOEXEC, &st);
  const int source_fd = ::dup(fd);
  try {
    const bool stamp_only = extras.carried.empty() && extras.sign == nullptr;
    const bool may_become_the_file = stamp_only && copy_may_become_the_file(source_fd);
    // Its bytes go to disk while they are checked and digested, so the fsync
    // before the rename has little left to wait for.
    if (may_become_the_file) ::sync_file_range(source_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    const TorchArchive copy(make_fd_source(fd, static_cast<uint64_t>(st.st_size), staged));
    if (copy.top_folder() != expected_top) {
      throw Error(ErrorKind::Torch, "libtorch named the top folder '" + copy.top_folder() + "', not '" + expected_top + "'",
                  display, "nothing was written");
    }
    // Hashed in full: the stamp's digests are the copy's.
    const VerifyReport gate = verify_archive(copy, VerifyOptions{0, built_libtorch_versions()});
    const std::string consequence = "nothing was written (the archive libtorch wrote is damaged)";
    refuse_damage(gate, display, consequence);
    refuse_unreadable(gate, display, consequence);
    if (content.archive_name.empty()) content.archive_name = copy.top_folder();
    if (!content.format_version) content.format_version = gate.format_version;
    // verify digested every record; the carried extra files replace or join them.
    const std::string stamp_record = extra_record_name(extras.stamp_name);
    if (extras.kept) refuse_other_extras(copy, gate.records, *extras.kept, stamp_record, display);
    if (extras.tensors_of != nullptr) refuse_other_tensors(*extras.tensors_of, copy, display);
    if (extras.judged_as != nullptr) {
      if (const std::string finding = unsafe_load_finding(copy, *extras.judged_as); !finding.empty()) {
        throw Error(ErrorKind::UnsafeToLoad, "the archive libtorch wrote is unsafe to load: " + finding, display,
                    "nothing was written; the model's code or a library it loaded changed what was saved: "
                    "run 'tsarchive verify' on the original");
      }
    }
    std::map<std::string, std::string> digests;
    for (const auto& [name, hex] : digests_without_stamp(gate.records, display, stamp_record)) digests[name] = hex;
    for (const ExtraEdit& e : extras.carried) {
      if (e.value) digests[extra_record_name(e.name)] = sha256_hex(*e.value);
    }
    digests.erase(stamp_record);
    digests.erase(kEmbeddedSignatureRecord);
    content.digests.emplace(digests.begin(), digests.end());
    StagedStamp written{{}, render_stamp(content), gate.format_version, {}};
    // The hook's stamp reserved room for this one (pad_stamp): the same
    // length keeps every other byte of the copy where it is.
    const Record* hook_stamp = copy.find(stamp_record);
    if (stamp_only && hook_stamp != nullptr) {
      written.stamp = pad_stamp(std::move(written.stamp), hook_stamp->entry->uncompressed_size);
    }
    std::vector<ExtraEdit> edits = std::move(extras.carried);  // values may be large: moved, never copied
    edits.push_back(ExtraEdit{extras.stamp_name, written.stamp});
    if (extras.sign != nullptr) {
      EmbeddedSignature signature = sign_archive_records(gate.records, edits, copy.top_folder(), *extras.sign, display);
      written.signer = signature.signed_records.signer;
      edits.push_back(std::move(signature.edit));
    }
    const ExtraEditPlan plan = plan_extra_edits(copy, std::move(edits), false);
    std::optional<WriteResult> taken;
    if (may_become_the_file && plan_keeps_offsets(plan.zip, static_cast<uint64_t>(st.st_size))) {
      // The final stamp, its CRC-32 and the central directory, written over the copy.
      const StagedFile patched{source_fd, staged, write_plan_over_source(plan.zip, source_fd, display)};
      taken = output.empty() ? file.replace(patched) : file.write_new(patched, output);
    }
    written.result = taken ? *taken
                     : output.empty() ? file.replace(plan.zip, source_fd)
                                      : file.write_new(plan.zip, output, source_fd);
    ::close(source_fd);
    return written;
  } catch (...) {
    ::close(source_fd);
    throw;
  }
}

}  // namespace tsarchive
