// Safe writes (core/edit/file_edit.h for the protocol).
//
// Journal of an --in-place edit, ".<name>.tsarchive-journal":
//   "tsarchive-journal 2\n"
//   u64 dev, u64 ino  the archive it belongs to (st_dev, st_ino)
//   u64 offset      first byte the edit rewrites
//   u64 old_size    of the file before the edit
//   u64 new_size    of the file after it
//   u32 new_crc     CRC-32 of the new bytes [offset, new_size)
//   u64 n           length of the old bytes that follow
//   n bytes         the old bytes [offset, old_size)
//   u32 crc         CRC-32 of everything above
// All integers little-endian. The CRC only detects a torn journal: anyone who
// can write the folder can make one that matches. So a journal is applied only
// by a command that edits (never by one that reads), and only when it passes
// trusted_journal_problem(): see file_edit.h for the trust model.
#include "core/edit/file_edit.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "base/posix_fd.h"
#include "base/error.h"
#include "core/edit/output_paths.h"
#include "format/zip_format.h"

namespace tsarchive {
namespace {

constexpr std::string_view kJournalMagic = "tsarchive-journal 2\n";
constexpr std::string_view kJournalMagicV1 = "tsarchive-journal 1\n";
constexpr std::string_view kTempInfix = ".tsarchive-";
constexpr size_t kRandomChars = 6;  // mkstemp's and mkdtemp's XXXXXX
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

void fsync_or_throw(int fd, const std::string& name) {
  if (::fsync(fd) != 0) throw_io("cannot flush to disk: " + errno_text(), name, "check the disk");
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename is done; a folder we cannot open cannot be synced
  ::fsync(fd);
  ::close(fd);
}

void pwrite_all(int fd, std::string_view bytes, uint64_t offset, const std::string& name) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io("cannot write: " + errno_text(), name, "free some disk space or check permissions");
    bytes.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

std::string pread_exact(int fd, uint64_t offset, uint64_t length, const std::string& name) {
  std::string out(static_cast<size_t>(length), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("cannot read: " + errno_text(), name);
    if (n == 0) throw_io("the file shrank while being edited", name, "do not change it while tsarchive edits it");
    done += static_cast<size_t>(n);
  }
  return out;
}

std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string journal_path_of(const std::string& dir, const std::string& base) {
  return dir + "/." + base + ".tsarchive-journal";
}

// Temp files and staging folders: ".<base>.tsarchive-<pid>-XXXXXX", made by
// mkstemp/mkdtemp, and held with flock(2) LOCK_EX by their writer while it
// works. A killed writer (kill -9, a crash, power loss) leaves them behind;
// the next writer next to the same file removes one only when nobody holds
// its lock AND the pid in its name is not a live process. The lock covers live
// writers in any process (also a forked child that inherited the descriptor,
// and other pid namespaces); the pid covers the moment between mkstemp and
// flock, and the one between close and rename. Names without a pid (written
// by earlier builds) are removed when unlocked, as those builds did.
std::string leftover_template(const std::string& dir, const std::string& base) {
  return dir + "/." + base + std::string(kTempInfix) + std::to_string(::getpid()) + "-XXXXXX";
}

bool is_random_part(std::string_view s) {
  if (s.size() != kRandomChars) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Whether `name` is a temp file or staging folder of `base`; *pid is 0 when
// the name carries none.
bool parse_leftover_name(std::string_view name, std::string_view prefix, pid_t* pid) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  std::string_view rest = name.substr(prefix.size());
  *pid = 0;
  if (is_random_part(rest)) return true;  // no pid: an older version's
  const size_t dash = rest.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 9 || !is_random_part(rest.substr(dash + 1))) return false;
  long value = 0;
  for (char c : rest.substr(0, dash)) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *pid = static_cast<pid_t>(value);
  return value > 0;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Removes a staging folder: its regular files, then itself. Anything else
// inside (which we never create) leaves it in place.
bool remove_staging_folder(int parent_fd, const std::string& name) {
  const int fd = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return false;
  }
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
      ::unlinkat(fd, entry->d_name, 0);
    }
  }
  ::closedir(dir);
  return ::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

// Removes one leftover if its writer is gone (see above); false if it is in use.
bool remove_if_abandoned(int dir_fd, const std::string& name, pid_t pid) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }  // also drops our lock, after the removal
  } closer{fd};
  struct stat st {}, again {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return false;  // its writer is alive and holds it
  if (pid > 0 && process_alive(pid)) return false;        // made but not yet locked, or being renamed
  // The name must still be the one we locked (not a new writer's, made meanwhile).
  if (::fstatat(dir_fd, name.c_str(), &again, AT_SYMLINK_NOFOLLOW) != 0 || st.st_ino != again.st_ino ||
      st.st_dev != again.st_dev) {
    return false;
  }
  return S_ISDIR(st.st_mode) ? remove_staging_folder(dir_fd, name) : ::unlinkat(dir_fd, name.c_str(), 0) == 0;
}

int remove_leftovers(const std::string& dir_path, const std::string& base) {
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) return 0;
  const std::string prefix = "." + base + std::string(kTempInfix);
  std::vector<std::pair<std::string, pid_t>> found;
  while (const dirent* entry = ::readdir(dir)) {
    pid_t pid = 0;
    if (parse_leftover_name(entry->d_name, prefix, &pid)) found.emplace_back(entry->d_name, pid);
  }
  int removed = 0;
  for (const auto& [name, pid] : found) removed += remove_if_abandoned(::dirfd(dir), name, pid) ? 1 : 0;
  ::closedir(dir);
  return removed;
}

// The one temp file a process has open for writing; signal handlers remove it.
char g_temp_path[PATH_MAX];
volatile sig_atomic_t g_temp_armed = 0;

// The one staging folder a process has (stamp, trace, convert), and the
// child that may be writing into it: on SIGINT, SIGTERM or SIGHUP the child
// is killed, the folder and any temp file removed, one line printed, and the
// process exits 128 + the signal. Everything here is async-signal-safe.
volatile sig_atomic_t g_staging_armed = 0;
int g_staging_parent_fd = -1;
char g_staging_name[NAME_MAX + 1];
char g_staging_message[PATH_MAX + 256];  // what follows "interrupted by SIGxxx"
size_t g_staging_message_size = 0;
volatile pid_t g_staging_child = 0;

// struct linux_dirent64 (getdents64(2)): u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[].
constexpr size_t kDirentReclen = 16;
constexpr size_t kDirentName = 19;

void write_stderr(const char* text, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

void remove_staging_folder_now() {
  const int fd = ::openat(g_staging_parent_fd, g_staging_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buffer[4096];
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        unsigned short reclen = 0;
        std::memcpy(&reclen, buffer + at + kDirentReclen, sizeof reclen);
        const char* entry_name = buffer + at + kDirentName;
        if (std::strcmp(entry_name, ".") != 0 && std::strcmp(entry_name, "..") != 0) ::unlinkat(fd, entry_name, 0);
        if (reclen == 0) break;
        at += reclen;
      }
    }
    ::close(fd);
  }
  ::unlinkat(g_staging_parent_fd, g_staging_name, AT_REMOVEDIR);
}

extern "C" void clean_up_staging_and_exit(int sig) {
  const int saved_errno = errno;
  const pid_t child = g_staging_child;
  if (child > 0) {
    ::kill(child, SIGKILL);
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (g_temp_armed) ::unlink(g_temp_path);
  remove_staging_folder_now();
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
  constexpr char kPrefix[] = "tsarchive: error: interrupted by ";
  write_stderr(kPrefix, sizeof kPrefix - 1);
  write_stderr(name, std::strlen(name));
  write_stderr(g_staging_message, g_staging_message_size);
  errno = saved_errno;
  ::_exit(128 + sig);
}

extern "C" void remove_temp_and_reraise(int sig) {
  if (g_staging_armed) clean_up_staging_and_exit(sig);  // the final write of a staged archive
  if (g_temp_armed) ::unlink(g_temp_path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// A temp file next to `final_path`, removed unless committed, also on SIGINT,
// SIGTERM and SIGHUP.
class TempFile {
 public:
  // `elsewhere`: how to write elsewhere instead, for the hint when the folder is not writable.
  TempFile(const std::string& dir, const std::string& base, const std::string& shown_name,
           const char* elsewhere = "or write elsewhere with -o")
      : shown_(shown_name) {
    path_ = leftover_template(dir, base);
    if (path_.size() >= sizeof g_temp_path) throw_io("the path is too long", shown_name);
    fd_ = ::mkostemp(path_.data(), O_CLOEXEC);
    if (fd_ < 0) {
      const int err = errno;
      throw_io("cannot create a temp file next to it: " + std::string(std::strerror(err)), shown_name,
               err == EACCES || err == EROFS ? std::string("the folder must be writable; ") + elsewhere
                                             : std::string("check the folder and the disk"));
    }
    ::flock(fd_, LOCK_EX);  // tells the next editor this temp file is in use (see remove_leftovers)
    std::memcpy(g_temp_path, path_.c_str(), path_.size() + 1);
    g_temp_armed = 1;
    struct sigaction action {};
    action.sa_handler = remove_temp_and_reraise;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i) ::sigaction(kCleanupSignals[i], &action, &saved_[i]);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &saved_xfsz_);
  }

  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
    g_temp_armed = 0;
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i) ::sigaction(kCleanupSignals[i], &saved_[i], nullptr);
    ::sigaction(SIGXFSZ, &saved_xfsz_, nullptr);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }

  void set_mode(mode_t mode, const struct stat* owner) {
    if (owner != nullptr && ::geteuid() == 0) {
      if (::fchown(fd_, owner->st_uid, owner->st_gid) != 0) { /* keep root's: the mode still applies */ }
    }
    if (::fchmod(fd_, mode & 07777) != 0) throw_io("cannot set the file mode: " + errno_text(), shown_);
  }

  // fsync, then rename over `final_path`, then fsync the folder.
  void commit(const std::string& final_path, const std::string& dir) {
    fsync_or_throw(fd_, shown_);
    if (::close(fd_) != 0) {
      fd_ = -1;
      throw_io("cannot write: " + errno_text(), shown_, "check the disk");
    }
    fd_ = -1;
    if (::rename(path_.c_str(), final_path.c_str()) != 0) {
      throw_io("cannot replace the file: " + errno_text(), shown_, "check the folder's permissions");
    }
    committed_ = true;
    g_temp_armed = 0;
    fsync_dir(dir);
  }

 private:
  std::string path_;
  std::string shown_;
  int fd_ = -1;
  bool committed_ = false;
  struct sigaction saved_[std::size(kCleanupSignals)] {};
  struct sigaction saved_xfsz_ {};
};

// Holds SIGINT, SIGTERM and SIGHUP for the few milliseconds of an in-place
// write, and ignores SIGXFSZ so a file size limit is a write error we undo.
class SignalHold {
 public:
  SignalHold() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kCleanupSignals) sigaddset(&set, sig);
    ::sigprocmask(SIG_BLOCK, &set, &saved_);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &saved_xfsz_);
  }
  ~SignalHold() {
    ::sigaction(SIGXFSZ, &saved_xfsz_, nullptr);
    ::sigprocmask(SIG_SETMASK, &saved_, nullptr);
  }
  SignalHold(const SignalHold&) = delete;
  SignalHold& operator=(const SignalHold&) = delete;

 private:
  sigset_t saved_;
  struct sigaction saved_xfsz_ {};
};

mode_t current_umask() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

bool unchanged(const struct stat& a, const struct stat& b) {
  return same_file(a, b) && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

std::string megabytes(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

// libtorch 1.13 does not survive a failed write while it saves: on a full
// disk its PyTorchStreamWriter throws again from its destructor
// (std::terminate, a core dump); under a file size limit it writes a
// truncated file and reports nothing. So a libtorch save starts only when
// there is room for its copy and for the final temp file, each about
// `copy_bytes`, and the file size limit allows one.
void require_room_for_copies(const std::string& dir, uint64_t copy_bytes, const std::string& shown) {
  const uint64_t copy = copy_bytes + copy_bytes / 16 + (1 << 20);  // a re-save may come out a little larger
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0) {
    const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (available < 2 * copy) {
      throw_io("not enough free space: " + megabytes(available) + " free in " + dir + ", libtorch's copy and the final file need about " +
                   megabytes(2 * copy),
               shown, "free some disk space, or write elsewhere with -o");
    }
  }
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < copy) {
    throw_io("the file size limit (" + megabytes(limit.rlim_cur) + ") is below the about " + megabytes(copy) +
                 " that libtorch's copy needs",
             shown, "raise it (ulimit -f)");
  }
}

// No journal tsarchive writes is larger: --in-place rewrites at most what the
// caller allows (64 MiB for extra), plus the header.
constexpr uint64_t kJournalMaxSize = (1ull << 32);

// Editors hold flock(2) LOCK_EX on the archive, so they take turns. Readers
// take no flock: an edit replaces the file by rename, and a reader keeps the
// inode it opened. Only an --in-place edit (and its recovery) changes bytes a
// reader may be reading, so it also takes an open-file-description write lock
// on byte 0, where readers take a read lock.
// Why a journal in folder `dir` could have been written by someone other than
// `owner` (the archive's owner), or "" when it could not: a folder others can
// write to without the sticky bit lets them replace any file in it, and the
// owner of a folder may do anything in it.
std::string journal_folder_problem(const struct stat& dir, uid_t owner) {
  if ((dir.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (dir.st_mode & S_ISVTX) == 0) {
    return "its folder is writable by others and has no sticky bit";
  }
  if (dir.st_uid != owner && dir.st_uid != 0) {
    return "its folder belongs to uid " + std::to_string(dir.st_uid) + ", not to the archive's owner";
  }
  return "";
}

bool try_flock(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  if (errno != EWOULDBLOCK && errno != EINTR) throw_io("cannot lock the file: " + errno_text(), path);
  return false;
}

bool try_content_lock(int fd, short type, const std::string& path) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 1;
  if (::fcntl(fd, F_OFD_SETLK, &lock) == 0) return true;
  // A file system without record locks: readers and --in-place go on without
  // this lock, as with programs that do not know it (editors still flock).
  if (errno == EINVAL || errno == ENOLCK || errno == EOPNOTSUPP) return true;
  if (errno != EAGAIN && errno != EACCES && errno != EINTR) throw_io("cannot lock the file: " + errno_text(), path);
  return false;
}

}  // namespace

StagingFolder::StagingFolder(const std::string& next_to, uint64_t copy_bytes) {
  const auto [dir, base] = split_path(next_to);
  parent_ = dir;
  remove_leftovers(dir, base);  // what a killed run with the same destination left
  require_room_for_copies(dir, copy_bytes, next_to);
  path_ = leftover_template(dir, base);
  if (::mkdtemp(path_.data()) == nullptr) {
    const int err = errno;
    throw_io("cannot create a staging folder next to it: " + std::string(std::strerror(err)), next_to,
             err == EACCES || err == EROFS ? "the folder must be writable; or write elsewhere with -o"
                                           : "check the folder and the disk");
  }
  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);  // in use: the next writer leaves it alone

  // Interrupted (Ctrl-C, SIGTERM, SIGHUP): remove it and say so (see clean_up_staging_and_exit).
  const std::string name = path_.substr(path_.rfind('/') + 1);
  const std::string message = " while writing " + next_to + ": removed its staging folder; nothing was written\n";
  const int parent_fd = ::open(parent_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_staging_armed == 0 && parent_fd >= 0 && name.size() < sizeof g_staging_name &&
      message.size() < sizeof g_staging_message) {
    g_staging_parent_fd = parent_fd;
    std::memcpy(g_staging_name, name.c_str(), name.size() + 1);
    std::memcpy(g_staging_message, message.data(), message.size());
    g_staging_message_size = message.size();
    g_staging_child = 0;
    struct sigaction action {};
    action.sa_handler = clean_up_staging_and_exit;
    sigemptyset(&action.sa_mask);
    for (int sig : kCleanupSignals) sigaddset(&action.sa_mask, sig);  // one cleanup, not two
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i) ::sigaction(kCleanupSignals[i], &action, &saved_[i]);
    g_staging_armed = 1;
    armed_ = true;
  } else if (parent_fd >= 0) {
    ::close(parent_fd);
  }
}

void StagingFolder::watch_child(pid_t pid) { g_staging_child = pid; }

StagingFolder::~StagingFolder() {
  if (armed_) {
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i) ::sigaction(kCleanupSignals[i], &saved_[i], nullptr);
    g_staging_armed = 0;
    g_staging_child = 0;
    ::close(g_staging_parent_fd);
    g_staging_parent_fd = -1;
  }
  const int parent = ::open(parent_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent >= 0) {
    remove_staging_folder(parent, path_.substr(path_.rfind('/') + 1));
    ::close(parent);
  }
  if (fd_ >= 0) ::close(fd_);
}

int remove_leftovers_next_to(const std::string& path) {
  const auto [dir, base] = split_path(path);
  return remove_leftovers(dir, base);
}

ArchiveFile::ArchiveFile(const std::string& path, FileAccess access, double lock_timeout_seconds)
    : path_(path), access_(access) {
  if (is_standard_stream(path) && access != FileAccess::Read) {
    throw_usage("standard input ('-') cannot be edited: this command changes the archive it reads",
                "give the archive as a file, or write the result elsewhere with -o FILE where the command has it");
  }
  open_and_lock(lock_timeout_seconds);
  struct stat journal {};
  if (!is_standard_stream(path) && ::lstat(journal_path().c_str(), &journal) == 0) {
    if (access_ == FileAccess::Read) {
      notes_.push_back(interrupted_edit_note(path_));
    } else {
      recover_interrupted_edit();
    }
  }
  if (access_ != FileAccess::Read) remove_stale_temp_files();
}

ArchiveFile::~ArchiveFile() {
  if (fd_ >= 0) ::close(fd_);  // also releases the locks
}

void ArchiveFile::open_and_lock(double lock_timeout_seconds) {
  const int flags = access_ == FileAccess::EditInPlace ? O_RDWR : O_RDONLY;
  lock_deadline_ = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(lock_timeout_seconds));
  const char* wait_hint = "wait for it to finish, or give it longer with --lock-timeout SECONDS";
  while (true) {
    fd_ = open_regular_file(path_, flags, &opened_);
    if (is_standard_stream(path_)) {  // a copy of its own, or a file given as stdin: only a reader's lock
      wait_for_lock([&] { return try_content_lock(fd_, F_RDLCK, path_); },
                    "another process is editing this file in place (it holds the write lock)", wait_hint);
      return;
    }
    char resolved[PATH_MAX];
    if (::realpath(path_.c_str(), resolved) == nullptr) throw_io("cannot resolve the path: " + errno_text(), path_);
    target_ = resolved;
    std::tie(dir_, base_) = split_path(target_);

    if (access_ == FileAccess::Read) {
      wait_for_lock([&] { return try_content_lock(fd_, F_RDLCK, path_); },
                    "another process is editing this file in place (it holds the write lock)", wait_hint);
    } else {
      wait_for_lock([&] { return try_flock(fd_, path_); }, "another process is editing this file (it holds the lock)",
                    wait_hint);
      if (access_ == FileAccess::EditInPlace) {
        wait_for_lock([&] { return try_content_lock(fd_, F_WRLCK, path_); },
                      "another process is reading this file (it holds a read lock), and --in-place changes bytes it "
                      "may be reading",
                      "wait for it to finish, give it longer with --lock-timeout SECONDS, or leave out --in-place");
      }
    }
    // The lock is on the inode we opened; an editor that held it may have
    // renamed a new file over the path. Then lock that one instead.
    struct stat now {};
    if (::stat(target_.c_str(), &now) == 0 && same_file(now, opened_)) {
      ::fstat(fd_, &opened_);
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
}

template <class TryLock>
void ArchiveFile::wait_for_lock(TryLock try_lock, const char* busy, const char* hint) const {
  while (!try_lock()) {
    if (std::chrono::steady_clock::now() >= lock_deadline_) throw_io(busy, path_, hint);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::unique_ptr<ByteSource> ArchiveFile::source() const {
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw_io("cannot read: " + errno_text(), path_);
  return make_fd_source(fd, static_cast<uint64_t>(opened_.st_size), path_);
}

std::string ArchiveFile::journal_path() const { return journal_path_of(dir_, base_); }

void ArchiveFile::remove_stale_temp_files() {
  const int removed = remove_leftovers(dir_, base_);
  if (removed > 0) {
    notes_.push_back("removed " + std::to_string(removed) + " temp file(s) left by an interrupted edit of " + path_);
  }
}

void ArchiveFile::recover_interrupted_edit() {
  const std::string journal_path = this->journal_path();
  // The bytes readers may be reading change: take the write lock they respect.
  // An in-place editor holds it on fd_ already (a second open file would
  // conflict with it); any other editor opens the file for writing here.
  Fd own;
  int fd = fd_;
  if (access_ != FileAccess::EditInPlace) {
    struct stat st {};
    own = Fd(open_regular_file(target_, O_RDWR, &st));
    if (!same_file(st, opened_)) throw_io("the file was replaced while it was being opened", path_, "run the command again");
    fd = own.get();
    wait_for_lock([&] { return try_content_lock(fd, F_WRLCK, path_); },
                  "another process is reading this file, and finishing an interrupted --in-place edit changes its bytes",
                  "wait for it to finish, or give it longer with --lock-timeout SECONDS");
  }

  const Journal journal = read_trusted_journal(journal_path);
  const auto size = static_cast<uint64_t>(opened_.st_size);
  bool completed = false;
  if (size == journal.new_size && journal.new_size >= journal.offset) {
    completed = zipfmt::crc32(pread_exact(fd, journal.offset, journal.new_size - journal.offset, path_)) == journal.new_crc;
  }
  if (!completed) {
    pwrite_all(fd, journal.old_tail, journal.offset, path_);
    if (::ftruncate(fd, static_cast<off_t>(journal.old_size)) != 0) {
      throw_io("cannot restore the file: " + errno_text(), path_);
    }
    fsync_or_throw(fd, path_);
  }
  if (::unlink(journal_path.c_str()) != 0) throw_io("cannot remove the journal: " + errno_text(), journal_path);
  fsync_dir(dir_);
  notes_.push_back(completed ? "an interrupted --in-place edit of " + path_ + " had finished writing; kept it"
                             : "undid an interrupted --in-place edit of " + path_ + "; it is as it was before");
  ::fstat(fd_, &opened_);
}

// A journal is trusted only when nobody but the archive's owner could have
// written it: see file_edit.h. Anything else is left where it is and named.
ArchiveFile::Journal ArchiveFile::read_trusted_journal(const std::string& journal_path) const {
  const auto untrusted = [&](const std::string& why) {
    throw_io("found the journal of an --in-place edit that tsarchive cannot trust (" + why + "); left it alone",
             journal_path,
             "if no --in-place edit of yours was interrupted, remove it by hand; otherwise check the archive with "
             "'tsarchive verify' first");
  };
  struct stat dir {};
  if (::stat(dir_.c_str(), &dir) != 0) throw_io("cannot check the folder: " + errno_text(), dir_);
  const std::string folder = journal_folder_problem(dir, opened_.st_uid);
  if (!folder.empty()) untrusted(folder);

  Fd jfd(::open(journal_path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (jfd.get() < 0) {
    if (errno == ELOOP) untrusted("it is a symbolic link");
    throw_io("cannot open the journal: " + errno_text(), journal_path);
  }
  struct stat jst {};
  if (::fstat(jfd.get(), &jst) != 0) throw_io("cannot read the journal: " + errno_text(), journal_path);
  if (!S_ISREG(jst.st_mode)) untrusted("it is not a regular file");
  if (jst.st_uid != opened_.st_uid) {
    untrusted("it belongs to uid " + std::to_string(jst.st_uid) + ", the archive to uid " +
              std::to_string(opened_.st_uid));
  }
  if (jst.st_nlink != 1) untrusted("it has " + std::to_string(jst.st_nlink) + " hard links");
  if ((jst.st_mode & (S_IWGRP | S_IWOTH)) != 0) untrusted("others may write to it");
  if (static_cast<uint64_t>(jst.st_size) > kJournalMaxSize) untrusted("it is larger than any journal tsarchive writes");
  const std::string bytes = pread_exact(jfd.get(), 0, static_cast<uint64_t>(jst.st_size), journal_path);

  if (bytes.compare(0, kJournalMagicV1.size(), kJournalMagicV1) == 0) {
    untrusted("an older tsarchive wrote it, without the archive's identity");
  }
  const auto damaged = [&] { untrusted("it is damaged or not a tsarchive journal"); };
  if (bytes.size() < kJournalMagic.size() + 8 * 6 + 4 * 2 || bytes.compare(0, kJournalMagic.size(), kJournalMagic) != 0) {
    damaged();
  }
  ByteReader r(bytes, "journal");
  r.skip(kJournalMagic.size());
  Journal j;
  const uint64_t dev = r.u64(), ino = r.u64();
  j.offset = r.u64();
  j.old_size = r.u64();
  j.new_size = r.u64();
  j.new_crc = r.u32();
  const uint64_t n = r.u64();
  if (n > r.remaining() || r.remaining() - n != 4) damaged();
  j.old_tail = std::string(r.bytes(n));
  const uint32_t crc = r.u32();
  if (crc != zipfmt::crc32(std::string_view(bytes).substr(0, bytes.size() - 4)) || j.offset + n != j.old_size) damaged();
  if (dev != static_cast<uint64_t>(opened_.st_dev) || ino != static_cast<uint64_t>(opened_.st_ino)) {
    untrusted("it belongs to another file (device " + std::to_string(dev) + ", inode " + std::to_string(ino) + ")");
  }
  // Killed while writing, the file is between its old and its new size.
  const auto size = static_cast<uint64_t>(opened_.st_size);
  if (size < std::min(j.old_size, j.new_size) || size > std::max(j.old_size, j.new_size) || j.new_size < j.offset) {
    untrusted("the archive's size, " + std::to_string(size) + " bytes, is neither its old " +
              std::to_string(j.old_size) + " nor its new " + std::to_string(j.new_size) + " nor between them");
  }
  return j;
}

WriteResult ArchiveFile::replace(const ZipRewritePlan& plan, int plan_source_fd) {
  if (plan_source_fd < 0 && plan.identical_to(static_cast<uint64_t>(opened_.st_size))) {
    return WriteResult{false, false, 0, plan.size};
  }
  TempFile temp(dir_, base_, path_);
  temp.set_mode(opened_.st_mode, &opened_);
  write_plan(plan, plan_source_fd < 0 ? fd_ : plan_source_fd, temp.fd(), path_);
  struct stat now {};
  if (::stat(target_.c_str(), &now) != 0 || !unchanged(now, opened_)) {
    throw_io("the file changed while it was being edited; nothing was written", path_,
             "another program wrote to it; run the command again");
  }
  temp.commit(target_, dir_);
  ::fstat(fd_, &opened_);
  return WriteResult{true, false, plan.size, plan.size};
}

WriteResult ArchiveFile::write_new(const ZipRewritePlan& plan, const std::string& out_path, int plan_source_fd) const {
  refuse_link_output(out_path);  // -o used to be written through (realpath, then rename over the target)
  struct stat existing {};
  const bool exists = ::stat(out_path.c_str(), &existing) == 0;
  if (exists && S_ISDIR(existing.st_mode)) throw_usage("-o names a folder: " + out_path, "give a file path");
  std::unique_ptr<ArchiveFile> out_lock;
  std::string target = out_path;
  if (exists) {
    if (same_file(existing, opened_)) throw_usage("-o names the input file", "leave out -o to edit it in place");
    out_lock = std::make_unique<ArchiveFile>(out_path, FileAccess::Edit, 0);  // also cleans its stale temp files
    target = out_lock->target_;
  }
  const auto [dir, base] = split_path(target);
  if (!exists) remove_leftovers(dir, base);  // out_lock did it for an existing file
  TempFile temp(dir, base, out_path);
  if (exists) {
    temp.set_mode(existing.st_mode, &existing);
  } else {
    temp.set_mode(opened_.st_mode & ~current_umask(), nullptr);
  }
  write_plan(plan, plan_source_fd < 0 ? fd_ : plan_source_fd, temp.fd(), out_path);
  temp.commit(target, dir);
  return WriteResult{true, false, plan.size, plan.size};
}

WriteResult ArchiveFile::write_stream(const ZipRewritePlan& plan,
                                      const std::function<void(std::string_view)>& write) const {
  constexpr uint64_t kPiece = 4u << 20;
  for (const ZipPiece& p : plan.pieces) {
    if (!p.from_source) {
      write(p.bytes);
      continue;
    }
    for (uint64_t done = 0; done < p.length;) {
      const uint64_t n = std::min(kPiece, p.length - done);
      write(pread_exact(fd_, p.source_offset + done, n, path_));
      done += n;
    }
  }
  return WriteResult{true, false, plan.size, plan.size};
}

InPlaceEdit ArchiveFile::prepare_in_place(const ZipRewritePlan& plan, uint64_t max_rewrite) {
  // Only old bytes are counted: they are read, journaled and rewritten.
  if (access_ != FileAccess::EditInPlace) throw_usage("internal: file not opened for an in-place edit");
  struct stat dir {};
  if (::stat(dir_.c_str(), &dir) != 0) throw_io("cannot check the folder: " + errno_text(), dir_);
  const std::string folder = journal_folder_problem(dir, opened_.st_uid);
  if (!folder.empty()) {
    throw_usage("--in-place keeps a journal next to the file, and here nobody could trust it: " + folder + " (" +
                    dir_ + ")",
                "leave out --in-place: the edit then replaces the file atomically");
  }
  const auto old_size = static_cast<uint64_t>(opened_.st_size);
  const uint64_t offset = plan.first_change;
  if (old_size - offset > max_rewrite) {
    throw_usage("--in-place would rewrite " + std::to_string(old_size - offset) + " of the file's " +
                    std::to_string(old_size) + " bytes: the edit changes a record that other records follow",
                "leave out --in-place; it is quick for new names and for the records tsarchive appended");
  }
  std::string old_tail = pread_exact(fd_, offset, old_size - offset, path_);
  std::string new_tail = render_plan(plan, offset, [&](uint64_t at, char* out, size_t n) {
    if (at >= offset) {
      std::memcpy(out, old_tail.data() + (at - offset), n);  // will be overwritten on disk
    } else {
      const std::string bytes = pread_exact(fd_, at, n, path_);
      std::memcpy(out, bytes.data(), n);
    }
  });
  return InPlaceEdit(*this, offset, old_size, std::move(old_tail), std::move(new_tail));
}

WriteResult ArchiveFile::write_in_place(const ZipRewritePlan& plan, uint64_t max_rewrite) {
  if (plan.identical_to(static_cast<uint64_t>(opened_.st_size))) return WriteResult{false, true, 0, plan.size};
  InPlaceEdit edit = prepare_in_place(plan, max_rewrite);
  SignalHold hold;
  edit.write_journal();
  try {
    edit.apply();
  } catch (const Error&) {
    edit.undo();  // e.g. the disk filled up half-way: put the old bytes back
    throw;
  }
  edit.finish();
  ::fstat(fd_, &opened_);
  return WriteResult{true, true, edit.bytes(), plan.size};
}

void InPlaceEdit::write_journal() {
  std::string journal(kJournalMagic);
  zipfmt::put64(journal, static_cast<uint64_t>(file_->opened_.st_dev));
  zipfmt::put64(journal, static_cast<uint64_t>(file_->opened_.st_ino));
  zipfmt::put64(journal, offset_);
  zipfmt::put64(journal, old_size_);
  zipfmt::put64(journal, offset_ + new_tail_.size());
  zipfmt::put32(journal, zipfmt::crc32(new_tail_));
  zipfmt::put64(journal, old_tail_.size());
  journal += old_tail_;
  zipfmt::put32(journal, zipfmt::crc32(journal));
  const std::string journal_path = file_->journal_path();
  TempFile temp(file_->dir_, file_->base_, file_->path_);
  temp.set_mode(S_IRUSR | S_IWUSR, &file_->opened_);  // the archive's owner's alone: see the trust model
  pwrite_all(temp.fd(), journal, 0, journal_path);
  temp.commit(journal_path, file_->dir_);
}

void InPlaceEdit::apply() {
  const int fd = file_->fd_;
  pwrite_all(fd, new_tail_, offset_, file_->path_);
  const uint64_t new_size = offset_ + new_tail_.size();
  if (new_size < old_size_ && ::ftruncate(fd, static_cast<off_t>(new_size)) != 0) {
    throw_io("cannot shorten the file: " + errno_text(), file_->path_);
  }
  fsync_or_throw(fd, file_->path_);
}

void InPlaceEdit::undo() noexcept {
  const int fd = file_->fd_;
  size_t done = 0;
  while (done < old_tail_.size()) {
    const ssize_t n = ::pwrite(fd, old_tail_.data() + done, old_tail_.size() - done, static_cast<off_t>(offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the journal stays; the next edit of the file restores it
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(old_size_)) != 0 || ::fsync(fd) != 0) return;
  finish_quietly();
}

void InPlaceEdit::finish_quietly() noexcept {
  const std::string journal_path = file_->journal_path();
  if (::unlink(journal_path.c_str()) == 0) fsync_dir(file_->dir_);
}

void InPlaceEdit::finish() {
  const std::string journal_path = file_->journal_path();
  if (::unlink(journal_path.c_str()) != 0) throw_io("cannot remove the journal: " + errno_text(), journal_path);
  fsync_dir(file_->dir_);
}

std::string interrupted_edit_note(const std::string& path) {
  if (is_standard_stream(path)) return "";
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return "";
  const auto [dir, base] = split_path(resolved);
  const std::string journal = journal_path_of(dir, base);
  struct stat st {};
  if (::lstat(journal.c_str(), &st) != 0) return "";
  return "an interrupted --in-place edit left a journal next to " + path + " (" + journal +
         "); commands that only read leave it alone, and the next edit of the file finishes or undoes it";
}

// Outputs are never symbolic links (output_paths.h): a link made after the
// command's own check is refused here too, rather than replaced.
void write_file_atomically(const std::string& path, const std::function<void(const ChunkWriter&)>& produce) {
  refuse_link_output(path);
  struct stat existing {};
  const bool exists = ::stat(path.c_str(), &existing) == 0;
  if (exists && !S_ISREG(existing.st_mode)) throw_io("not a regular file; refusing to replace it", path);
  const auto [dir, base] = split_path(path);
  remove_leftovers(dir, base);
  TempFile temp(dir, base, path, "or give a path in a folder you can write to");
  temp.set_mode(exists ? existing.st_mode : 0666 & ~current_umask(), exists ? &existing : nullptr);
  uint64_t offset = 0;
  produce([&](std::string_view chunk) {
    pwrite_all(temp.fd(), chunk, offset, path);
    offset += chunk.size();
  });
  temp.commit(path, dir);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, [&](const ChunkWriter& write) { write(bytes); });
}

}  // namespace tsarchive
