#include "operations/staged_save.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <map>
#include <optional>

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
// holds changed: data a user put in the archive is never dropped unnamed.
void refuse_lost_extras(const std::vector<RecordDigest>& copy, const std::vector<std::pair<std::string, std::string>>& kept,
                        const std::string& display) {
  std::map<std::string, const RecordDigest*> by_name;
  for (const RecordDigest& d : copy) by_name[d.name] = &d;
  for (const auto& [name, sha256] : kept) {
    const auto found = by_name.find(name);
    if (found != by_name.end() && found->second->sha256 == sha256) continue;
    throw Error(ErrorKind::Torch,
                "the archive libtorch re-saved " + std::string(found == by_name.end() ? "lacks " : "changed ") + name +
                    " of the original",
                display, "nothing was written; stamp it with --keep-bytes, which writes no copy");
  }
}

bool holds_tensor_bytes(RecordKind kind) { return kind == RecordKind::TensorData || kind == RecordKind::ConstantData; }

// Error(Torch) unless the copy's tensor storages are `original`'s (SHA-256,
// sorted) byte for byte. As a multiset: a re-save renumbers the storages, and
// nothing else about them may change.
void refuse_other_tensors(const TorchArchive& copy, const std::vector<RecordDigest>& digests,
                          const std::vector<std::string>& original, const std::string& display) {
  std::vector<std::string> copied;
  const RecordDigest* first_unknown = nullptr;
  for (const RecordDigest& d : digests) {
    const Record* r = copy.find(d.name);
    if (r == nullptr || !holds_tensor_bytes(r->kind)) continue;
    copied.push_back(d.sha256);
    if (first_unknown == nullptr && !std::binary_search(original.begin(), original.end(), d.sha256)) first_unknown = &d;
  }
  std::sort(copied.begin(), copied.end());
  if (copied == original) return;
  const std::string what = first_unknown != nullptr
                               ? "holds tensor data the original does not (" + first_unknown->name + ")"
                               : "holds " + std::to_string(copied.size()) + " tensor storages where the original has " +
                                     std::to_string(original.size());
  throw Error(ErrorKind::Torch, "the archive libtorch re-saved " + what, display,
              "nothing was written; the model's code or a library it loaded changed its weights while it was saved: "
              "stamp it with --keep-bytes, which writes no copy");
}

}  // namespace

std::vector<std::string> tensor_digests(const TorchArchive& archive) {
  DigestOptions options;
  options.kinds = {RecordKind::TensorData, RecordKind::ConstantData};
  std::vector<std::string> out;
  for (const RecordDigest& d : digest_records(archive, options)) {
    if (!d.problem.empty()) throw_bad_input("record '" + d.name + "': " + d.problem, archive.zip().source().name(),
                                            "nothing was written");
    out.push_back(d.sha256);
  }
  std::sort(out.begin(), out.end());
  return out;
}

StagedStamp write_staged_with_stamp(ArchiveFile& file, const std::string& staged, StampContent content,
                                    const std::string& output, const std::string& expected_top, const std::string& display,
                                    const StagedExtras& extras) {
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
    refuse_lost_extras(gate.records, extras.kept, display);
    if (extras.tensors) refuse_other_tensors(copy, gate.records, *extras.tensors, display);
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
    std::vector<ExtraEdit> edits = extras.carried;
    edits.push_back(ExtraEdit{extras.stamp_name, written.stamp});
    if (extras.sign != nullptr) {
      EmbeddedSignature signature = sign_archive_records(gate.records, edits, copy.top_folder(), *extras.sign, display);
      written.signer = signature.signed_records.signer;
      edits.push_back(std::move(signature.edit));
    }
    const ExtraEditPlan plan = plan_extra_edits(copy, edits, false);
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
