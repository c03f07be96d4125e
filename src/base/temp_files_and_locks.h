// Files written so that nothing half-written is ever left at a user's path,
// and the locks writers take: the POSIX machinery under ArchiveFile
// (core/edit/file_edit.h) and every other writer.
//  - TempFile: a temp file ".<name>.tsarchive-<pid>-XXXXXX" next to its final
//    path, flock'd while it is written, removed unless committed (also on
//    SIGINT, SIGTERM and SIGHUP), committed by fsync + rename + folder fsync.
//  - StagingFolder: a private folder next to a file, for files a library
//    writes by name; on SIGINT, SIGTERM or SIGHUP it is removed, a worker
//    writing into it killed, and the process exits 128 + the signal.
//  - Leftovers of killed writers: removed only when nobody holds their lock
//    and the pid in their name is not a live process.
//  - remove_tree_at: a folder with whatever a worker planted in it.
//  - SignalHold: those signals held off for the few milliseconds of an
//    in-place write.
//  - Locks: flock(2) LOCK_EX between editors, an open-file-description lock
//    on byte 0 between --in-place edits and readers.
// Every signal handler here is async-signal-safe.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>
#include <string_view>
#include <utility>

namespace tsarchive {

inline constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Small steps of durable writes and of comparing files.
namespace posix {

void fsync_or_throw(int fd, const std::string& name);
void fsync_dir(const std::string& dir);  // after a rename in it; a folder that cannot be opened is left as it is
void pwrite_all(int fd, std::string_view bytes, uint64_t offset, const std::string& name);
// Error(Io) when the file is shorter than offset + length (it shrank).
std::string pread_exact(int fd, uint64_t offset, uint64_t length, const std::string& name);
std::pair<std::string, std::string> split_path(const std::string& path);  // {folder, name}; "." for none
mode_t current_umask();
bool same_file(const struct stat& a, const struct stat& b);  // device and inode
bool unchanged(const struct stat& a, const struct stat& b);  // the same file, size and mtime

}  // namespace posix

// A temp file next to a final path, removed unless committed, also on
// SIGINT, SIGTERM and SIGHUP; SIGXFSZ is ignored while it lives, so a file
// size limit is an ordinary write error. One per process at a time.
class TempFile {
 public:
  // `elsewhere`: how to write elsewhere instead, for the hint when the folder is not writable.
  TempFile(const std::string& dir, const std::string& base, const std::string& shown_name,
           const char* elsewhere = "or write elsewhere with -o");
  // A file already written at `path` (open as `fd`, which is duplicated), in
  // a private folder on the final path's file system: committed like one
  // made here, removed unless committed.
  struct Adopt {};
  TempFile(Adopt, int fd, std::string path, std::string shown_name);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  // The mode, and with `owner` (when root) the owner and group. Without an
  // owner the file is a new one: it never gets setuid, setgid or sticky bits.
  void set_mode(mode_t mode, const struct stat* owner);
  // The extended attributes of the file open at `from` (ACLs, security
  // labels, user.* names), as far as this process may set them: the names
  // it could not set, for a note (a rename-based edit would drop them).
  std::vector<std::string> copy_attributes_from(int from);
  // fsync, then rename over `final_path`, then fsync the folder `dir`.
  void commit(const std::string& final_path, const std::string& dir);

 private:
  void arm();  // the lock, the signal handlers that remove the file, SIGXFSZ ignored

  std::string path_;
  std::string shown_;
  int fd_ = -1;
  bool committed_ = false;
  struct sigaction saved_[std::size(kCleanupSignals)] {};
  struct sigaction saved_xfsz_ {};
};

// Holds SIGINT, SIGTERM and SIGHUP for the few milliseconds of an in-place
// write, and ignores SIGXFSZ so a file size limit is a write error to undo.
class SignalHold {
 public:
  SignalHold();
  ~SignalHold();
  SignalHold(const SignalHold&) = delete;
  SignalHold& operator=(const SignalHold&) = delete;

 private:
  sigset_t saved_;
  struct sigaction saved_xfsz_ {};
};

// A private folder ".<name>.tsarchive-<pid>-XXXXXX" next to a file, for files
// that a library writes by name (torch::jit::save) before they are checked and
// moved into place. Locked (flock) while it lives, removed with its files when
// destroyed; one a killed run left behind is removed by the next writer of
// that file, like a temp file. Making one first removes such leftovers, then
// refuses (Error(Io)) unless the disk has room for two files of `copy_bytes`
// (the library's copy and the final temp file) and the file size limit for
// one: libtorch 1.13 cannot report a failed write (see require_room_for_copies).
class StagingFolder {
 public:
  StagingFolder(const std::string& next_to, uint64_t copy_bytes);
  ~StagingFolder();
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  const std::string& path() const { return path_; }

  // SIGINT, SIGTERM and SIGHUP while a staging folder lives: the child given
  // here (a worker writing into the folder; 0: none) is killed, the folder
  // and any temp file are removed, one line "tsarchive: error: interrupted by
  // SIGxxx ..." is printed, and the process exits 128 + the signal (130, 143,
  // 129).
  static void watch_child(pid_t pid);

 private:
  std::string parent_;
  std::string path_;
  int fd_ = -1;  // holds the folder's flock while it is in use
  bool armed_ = false;  // owns the signal handlers (one staging folder per process)
  struct sigaction saved_[3] {};
};

// Removes the temp files and staging folders that killed writers left next to
// a file (".<name>.tsarchive-<pid>-XXXXXX", and older ".<name>.tsarchive-XXXXXX"):
// only those whose lock nobody holds and whose pid is not a live process.
// Returns how many it removed. Every writer calls it before it writes.
int remove_leftovers_next_to(const std::string& path);
int remove_leftovers(const std::string& dir, const std::string& base);  // of file `base` in folder `dir`

// Removes `name` in folder `parent_fd` with everything under it, as a
// hostile worker may have left it in its folders: any depth (no path is
// formed, so PATH_MAX is no limit), folders of the user's of any mode (made
// 0700 first), links removed and never followed, nothing on another file
// system or mount touched. True when `name` is gone (or never was); false when
// something could not be removed, which is then given up, and left with the
// folders that lead to it. Async-signal-safe: no allocation, three descriptors
// at most, its buffers on the stack (about 9 KiB).
bool remove_tree_at(int parent_fd, const char* name);

// Error(Io) unless folder `dir` has room for two copies of about `copy_bytes`
// and the file size limit allows one; `shown` names the file in the error.
void require_room_for_copies(const std::string& dir, uint64_t copy_bytes, const std::string& shown);

// Editors hold flock(2) LOCK_EX on the archive, so they take turns. Readers
// take no flock: an edit replaces the file by rename, and a reader keeps the
// inode it opened. Only an --in-place edit (and its recovery) changes bytes a
// reader may be reading, so it also takes an open-file-description write lock
// on byte 0, where readers take a read lock (`type`: F_RDLCK or F_WRLCK).
// Both return false while another holds the lock; Error(Io) when locking fails.
bool try_flock(int fd, const std::string& path);
bool try_content_lock(int fd, short type, const std::string& path);

// Whether a lock of `type` on the content could be taken now (F_OFD_GETLK:
// nothing is taken, and a read-only descriptor may ask about a write lock).
// True where the file system has no record locks.
bool content_lock_free(int fd, short type);


}  // namespace tsarchive
