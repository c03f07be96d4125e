// The first steps of every operation that reads one archive: open and lock
// the file (readers never wait: only an --in-place edit takes the write lock),
// pass on what the open noticed (an interrupted edit nearby), read it as a
// TorchScript archive. What libtorch may see of it passes the gate first
// (gate.h).
#pragma once

#include <memory>
#include <string>

#include "core/edit/file_edit.h"
#include "format/archive.h"
#include "operations/notes.h"

namespace tsarchive {

// Seconds a reading command waits for its read lock: an editor holds the
// write lock only while it swaps the file in (or for an --in-place edit).
inline constexpr double kReaderLockTimeout = 10;

class OpenedArchive {
 public:
  // `cannot` says what fails for a file that is not a TorchScript archive
  // ("cannot run this file"). `accept_pt2` also opens a .pt2
  // (FileKind::ExportedProgram), for the operations that handle one.
  OpenedArchive(const std::string& path, FileAccess access, double lock_timeout, const std::string& cannot,
                const NoteSink& notes, bool accept_pt2 = false);

  ArchiveFile& file() { return file_; }  // to replace it (an edit)
  const ArchiveFile& file() const { return file_; }
  const TorchArchive& archive() const { return *archive_; }

 private:
  ArchiveFile file_;
  std::unique_ptr<TorchArchive> archive_;
};

}  // namespace tsarchive
