// Changing an archive on disk without ever losing it. The temp files,
// staging folders, signal cleanup and locks it is built on are
// base/temp_files_and_locks.h; this is what they mean for an archive.
//
// ArchiveFile opens a file for an edit, or to read it:
//  1. It locks it, waiting up to a timeout: editors take flock(2) LOCK_EX, so
//     two editors take turns; readers take no flock, because an edit replaces
//     the file by rename and a reader keeps reading the inode it opened. Only
//     an --in-place edit changes bytes a reader may be reading: it also takes
//     an open-file-description write lock (fcntl F_OFD_SETLK) on byte 0, where
//     readers take a read lock. Then it checks that the path still names the
//     file it locked (an editor that finished meanwhile renamed a new file
//     over it) and starts again if not. Symbolic links are followed: the file
//     they point to is edited and the link stays.
//  2. Opened to edit, it finishes or undoes an --in-place edit that was killed
//     (see below). Opened to read, it never does: it only notes the journal.
//  3. When editing, it removes temp files and staging folders a killed
//     writer left behind: ".<name>.tsarchive-<pid>-XXXXXX" next to the file.
//     Each writer holds flock(2) on its own while it works; one is removed
//     only when nobody holds that lock and no process has that pid, so a live
//     writer's file is never touched (remove_leftovers_next_to).
//
// Writing a plan:
//  - replace(): a temp file ".<name>.tsarchive-<pid>-XXXXXX" in the same folder,
//    written, fsync'd, given the original's mode (and owner, when root), then
//    renamed over the original, and the folder fsync'd. Just before the rename
//    the original must still be the file that was read (inode, size, mtime):
//    a program that changed it without locking makes the edit fail, not lose
//    its change. SIGINT, SIGTERM and SIGHUP remove the temp file; SIGXFSZ is
//    ignored so a file size limit is an ordinary write error.
//  - write_new(): the same, to another path (-o).
//  - write_in_place(): rewrites only the bytes from the first change on. The
//    old bytes it overwrites go first into a journal
//    ".<name>.tsarchive-journal" (mode 0600, the archive's owner; written to a
//    temp file, fsync'd, renamed), then the new bytes are written and
//    fsync'd, then the journal is removed. Signals are held off meanwhile.
//    After a kill -9 or a crash, the next edit of that file sees the journal
//    and either keeps the new bytes (all of them were written) or puts the old
//    ones back: the file is then exactly the old or exactly the new archive.
//    Until that happens, readers may see a damaged archive.
//
// Trust model of the journal. Applying a journal writes its "old bytes" into
// the archive, so a journal someone else planted would turn the archive into
// their model. A journal is applied only when all of these hold, and is
// otherwise left alone and named in an error (exit 4):
//  - the command edits the archive (extra set/rm/import, stamp, run --record);
//    inspect, verify, diff, run, extra list/get/export never apply one;
//  - the folder is writable only by its owner (or has the sticky bit, as /tmp
//    does), and that owner is the archive's owner or root; --in-place refuses
//    to write a journal in any other folder, so none of ours is ever there;
//  - the journal is a regular file, opened without following links, with one
//    link, owned by the archive's owner and writable by nobody else;
//  - it names the archive's device and inode, its CRC holds, and the archive's
//    size is its old size, its new size or between them.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file_state.h"
#include "base/temp_files_and_locks.h"  // StagingFolder, remove_leftovers_next_to: every writer's
#include "format/byte_source.h"
#include "format/zip_writer.h"

namespace tsarchive {

// Read: the file as it is, for a report. ReadHeld: for a reader whose checks
// vouch for the bytes libtorch reads afterwards (serve, verify --load): from
// the open on, what the checks read is what libtorch will read (see
// ArchiveFile::hold_contents). Edit: rewritten by rename. EditInPlace: the
// same inode rewritten.
enum class FileAccess { Read, ReadHeld, Edit, EditInPlace };
inline bool writes(FileAccess access) { return access == FileAccess::Edit || access == FileAccess::EditInPlace; }

struct WriteResult {
  bool written = false;     // false: the plan was the file as it is
  bool in_place = false;
  uint64_t bytes_written = 0;  // by this process (in place: the rewritten tail)
  uint64_t size = 0;           // of the file now
  // What replacing the model did beside the edit, for the user: extended
  // attributes it could not keep, other hard links left with the old content,
  // a read-only file replaced.
  std::vector<std::string> notes;
};

class InPlaceEdit;

// A file written elsewhere, open as `fd`, to put in an archive's place.
struct StagedFile {
  int fd = -1;
  std::string path;
  uint64_t bytes_written = 0;  // by this process, for WriteResult
};

// A file as it was opened (ArchiveFile::watched), for a reader that comes
// after the checks (libtorch, by the descriptor): a write to the file since
// (the same inode rewritten in place, which no lock stops) changes its ctime,
// and what that reader made of it is then not what was checked.
//
// That alone finds a rewrite after the fact, when the reader may already
// have run code from the new bytes (in its sandbox). So where the kernel
// grants it (the file's owner or CAP_LEASE, a local file system, nobody
// holding it open for writing) a read lease is held on it while libtorch
// reads it (fcntl F_SETLEASE): another process's open for writing, or a
// truncate, then waits until the lease is let go (up to the kernel's
// lease-break-time, 45 s by default) and unchanged() turns false at once, so
// the worker is stopped before any new byte can reach it, and then the writer
// goes on (release()). A lease break also sends SIGIO, which tsarchive ignores.
struct WatchedFile {
  int fd = -1;
  FileState state;
  bool leased = false;  // a read lease is held on fd (take_lease)
  // "/proc/self/fd/N", the path libtorch opens it by; "" without a descriptor.
  std::string descriptor_path() const { return fd >= 0 ? "/proc/self/fd/" + std::to_string(fd) : ""; }
  // Whether the file is still as recorded and, when leased, no writer waits
  // on the lease (false when it cannot be stat'ed).
  bool unchanged() const;
  // Takes the read lease (sets `leased`); false where the kernel refuses it,
  // e.g. EAGAIN: a process holds the file open for writing right now.
  bool take_lease();
  // Lets go of the lease: a writer waiting on it goes on.
  void release_lease();
};

class ArchiveFile {
 public:
  ArchiveFile(const std::string& path, FileAccess access, double lock_timeout_seconds);
  ~ArchiveFile();
  ArchiveFile(const ArchiveFile&) = delete;
  ArchiveFile& operator=(const ArchiveFile&) = delete;

  const std::string& path() const { return path_; }  // as the user gave it
  // The file opened, (st_dev, st_ino): what no output may replace.
  std::pair<uint64_t, uint64_t> identity() const {
    return {static_cast<uint64_t>(opened_.st_dev), static_cast<uint64_t>(opened_.st_ino)};
  }
  // A reader over the locked file; valid while this object lives.
  std::unique_ptr<ByteSource> source() const;
  // The file as it was opened, to tell later whether anything wrote it since.
  WatchedFile watched() const;
  // watched(), its state taken once settled (settled_file_state): for reads
  // that begin now and must be of one version of the file. Error(`if_written`)
  // when its size changed since it was opened (source() reads as many bytes
  // as it had then) or it is still being written.
  WatchedFile watched_settled(ErrorKind if_written) const;
  // What opening did besides opening: a recovered --in-place edit, removed temp files.
  const std::vector<std::string>& notes() const { return notes_; }

  // `plan_source_fd`: where the plan's source ranges are read from, when the
  // plan was made over another file (a staged copy); default this file.
  WriteResult replace(const ZipRewritePlan& plan, int plan_source_fd = -1);
  WriteResult write_new(const ZipRewritePlan& plan, const std::string& out_path, int plan_source_fd = -1) const;
  // A whole archive the caller has written and checked (the copy libtorch
  // saved in a StagingFolder next to the destination, patched there) takes
  // the destination's place as the temp file above would: the same mode and
  // owner, fsync, rename, folder fsync. std::nullopt, with nothing done, when
  // it is on another file system than the destination (copy it instead).
  std::optional<WriteResult> replace(const StagedFile& staged);
  std::optional<WriteResult> write_new(const StagedFile& staged, const std::string& out_path) const;
  // The planned archive handed to `write` in pieces of at most 4 MiB (-o -:
  // standard output). Not atomic: a reader of the stream sees the bytes
  // written before an error.
  WriteResult write_stream(const ZipRewritePlan& plan, const std::function<void(std::string_view)>& write) const;
  // Refuses (Error(Usage)) when more than `max_rewrite` bytes of the file as
  // it is would be rewritten (new bytes appended do not count).
  WriteResult write_in_place(const ZipRewritePlan& plan, uint64_t max_rewrite);

  // The steps of write_in_place, for tests that stop between them.
  InPlaceEdit prepare_in_place(const ZipRewritePlan& plan, uint64_t max_rewrite);

 private:
  friend class InPlaceEdit;
  friend class CheckedArchive;  // the only way to libtorch: checked_archive.h
  // "/proc/self/fd/N": the locked file itself (or its private copy), for code that opens by name (libtorch).
  std::string descriptor_path() const { return "/proc/self/fd/" + std::to_string(read_fd()); }
  // What readers read: the file, or under ReadHeld its private copy.
  int read_fd() const { return copy_fd_ >= 0 ? copy_fd_ : fd_; }
  const struct stat& read_stat() const { return copy_fd_ >= 0 ? copy_ : opened_; }
  void hold_contents();
  struct Journal {
    uint64_t offset = 0, old_size = 0, new_size = 0;
    uint32_t new_crc = 0;
    std::string old_tail;
  };

  // Where write_new() writes: the output locked when it exists, its target and folder.
  struct Output {
    std::unique_ptr<ArchiveFile> lock;
    std::string target, dir, base;
    bool exists = false;
    struct stat existing {};
  };
  Output open_output(const std::string& out_path) const;
  void commit_output(TempFile& temp, const Output& out) const;
  WriteResult commit_over_this(TempFile& temp, WriteResult result);

  void open_and_lock(double lock_timeout_seconds);
  template <class TryLock>
  void wait_for_lock(TryLock try_lock, const char* busy, const char* hint) const;
  void recover_interrupted_edit();
  Journal read_trusted_journal(const std::string& journal_path) const;
  void remove_stale_temp_files();
  std::string journal_path() const;

  std::string path_;         // as given
  std::string target_;       // symlinks resolved
  std::string dir_;          // folder of target_
  std::string base_;         // file name of target_
  FileAccess access_;
  int fd_ = -1;
  struct stat opened_ {};
  // EditInPlace: opened_'s FileState, taken once the ctime tick was past, for
  // InPlaceEdit::check_unchanged.
  FileState opened_state_;
  int copy_fd_ = -1;  // ReadHeld without a lease: the private copy read instead of fd_
  struct stat copy_ {};
  bool leased_ = false;  // ReadHeld: a read lease on fd_ (then no copy), held until it is closed
  std::chrono::steady_clock::time_point lock_deadline_;
  std::vector<std::string> notes_;
};

class InPlaceEdit {
 public:
  // Throws Error(Io) when the file is not as the edit read it (its FileState
  // and the bytes it will overwrite): a program that does not take
  // tsarchive's lock wrote it since it was opened. Best effort: nothing stops
  // such a writer between this check and the write that follows.
  void check_unchanged() const;
  void write_journal();
  void apply();   // writes the new tail and fsyncs
  void finish();  // removes the journal
  void undo() noexcept;  // after a failed apply(): old bytes back, journal removed
  uint64_t bytes() const { return new_tail_.size(); }

 private:
  friend class ArchiveFile;
  InPlaceEdit(ArchiveFile& file, uint64_t offset, uint64_t old_size, std::string old_tail, std::string new_tail)
      : file_(&file), offset_(offset), old_size_(old_size), old_tail_(std::move(old_tail)), new_tail_(std::move(new_tail)) {}

  void finish_quietly() noexcept;

  ArchiveFile* file_;
  uint64_t offset_;
  uint64_t old_size_;
  std::string old_tail_;
  std::string new_tail_;
};

// The note a reader prints when an interrupted --in-place edit left a journal
// next to `path` (which it never applies: see the trust model above), or "".
std::string interrupted_edit_note(const std::string& path);

// Writes what `produce` hands its writer to `path` atomically (temp file,
// fsync, rename), for content made or read in chunks: if `produce` throws,
// nothing is written and the temp file is removed.
using ChunkWriter = std::function<void(std::string_view chunk)>;
void write_file_atomically(const std::string& path, const std::function<void(const ChunkWriter&)>& produce);

// Writes `bytes` to `path` atomically (temp file, fsync, rename), for files
// that are not archives (extra get -o, extra export). New files get 0666 & ~umask.
// Removes leftovers of killed writers of `path` first.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace tsarchive
