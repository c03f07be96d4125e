// The one door to libtorch. libtorch 1.13 crashes, over-reads or allocates
// without bound on damaged archives and never checks a CRC, so nothing reaches
// it that the core has not read first. A CheckedArchive is the proof: only the
// functions below make one, and the descriptor libtorch opens
// (/proc/self/fd/N) is only to be had from one. A command that forgets the
// checks has nothing to hand the worker.
//
// The gate runs the structural checks and nothing else: the ZIP layout read
// two ways (our reader and libzip's), names, sizes, every record's CRC-32, the
// pickles, the storages against their records, the format and bytecode
// versions against the linked libtorch. It hashes nothing with SHA-256 and
// reads no stamp: that is `verify`'s question, not the gate's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/edit/file_edit.h"
#include "core/provenance/verify.h"
#include "format/archive.h"

namespace tsarchive {

class CheckedArchive {
 public:
  const TorchArchive& archive() const { return *archive_; }
  // The archive as the user named it, for messages.
  const std::string& file() const { return file_->path(); }
  // What libtorch opens: the locked descriptor the checks read.
  std::string libtorch_path() const { return file_->descriptor_path(); }
  // false: the user sent it unchecked (--no-validate); worker messages say so.
  bool checked() const { return checked_; }
  std::optional<int64_t> format_version() const { return format_version_; }
  uint64_t size() const { return archive_->zip().source().size(); }
  // The file as it was opened, before the checks read it (worker.h).
  WatchedFile watched() const { return file_->watched(); }

 private:
  CheckedArchive(const ArchiveFile& file, const TorchArchive& archive, bool checked, std::optional<int64_t> version)
      : file_(&file), archive_(&archive), checked_(checked), format_version_(version) {}

  friend CheckedArchive check_for_libtorch(const ArchiveFile&, const TorchArchive&, const std::string&);
  friend CheckedArchive admit_verified(const ArchiveFile&, const TorchArchive&, const VerifyReport&, const std::string&);
  friend CheckedArchive admit_unchecked(const ArchiveFile&, const TorchArchive&);

  // Views: the ArchiveFile (which holds the lock and the descriptor) and the
  // TorchArchive read from it outlive the CheckedArchive.
  const ArchiveFile* file_;
  const TorchArchive* archive_;
  bool checked_;
  std::optional<int64_t> format_version_;
};

// The gate: `archive`, read from `file`, passes the structural checks against
// the versions the built-against libtorch reads, or Error(BadInput) names the
// first problem. `consequence` says what did not happen ("nothing was run").
CheckedArchive check_for_libtorch(const ArchiveFile& file, const TorchArchive& archive, const std::string& consequence);

// For commands that ran the whole of verify_archive() already (verify --load,
// stamp): the same refusal from its report, without reading the archive again.
// The report must have been made with the built-against versions.
CheckedArchive admit_verified(const ArchiveFile& file, const TorchArchive& archive, const VerifyReport& report,
                              const std::string& consequence);

// Error(BadInput) naming the first problem `report` found: damage, or a
// format version the linked libtorch does not read. `consequence` as above.
void refuse_damage(const VerifyReport& report, const std::string& file, const std::string& consequence);
void refuse_unreadable(const VerifyReport& report, const std::string& file, const std::string& consequence);

// --no-validate: the user's explicit choice to hand libtorch the archive as it is.
CheckedArchive admit_unchecked(const ArchiveFile& file, const TorchArchive& archive);

// The hint for an archive written by a newer PyTorch than the linked libtorch reads.
std::string newer_libtorch_hint();

}  // namespace tsarchive
