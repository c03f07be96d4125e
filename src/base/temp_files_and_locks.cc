// Temp files, staging folders, their cleanup on signals, and locks (temp_files_and_locks.h).
#include "base/temp_files_and_locks.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/posix_fd.h"

namespace tsarchive {
namespace posix {

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

}  // namespace posix

using namespace posix;

namespace {

constexpr std::string_view kTempInfix = ".tsarchive-";
constexpr size_t kRandomChars = 6;  // mkstemp's and mkdtemp's XXXXXX

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

// struct linux_dirent64 (getdents64(2)): u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[].
constexpr size_t kDirentReclen = 16;
constexpr size_t kDirentType = 18;
constexpr size_t kDirentName = 19;

// A folder's entries but "." and "..", read with getdents64(2) into a buffer
// of its own: readdir without malloc, for the signal handlers.
class FolderEntries {
 public:
  explicit FolderEntries(int fd) : fd_(fd) {}
  FolderEntries(const FolderEntries&) = delete;
  FolderEntries& operator=(const FolderEntries&) = delete;

  // The next entry's name (valid until the next call) and d_type; nullptr at the end or on an error.
  const char* next(unsigned char* type) {
    for (;;) {
      if (at_ >= size_) {
        const long n = ::syscall(SYS_getdents64, fd_, buffer_, sizeof buffer_);
        if (n <= 0) return nullptr;
        size_ = n;
        at_ = 0;
      }
      const char* entry = buffer_ + at_;
      unsigned short reclen = 0;
      std::memcpy(&reclen, entry + kDirentReclen, sizeof reclen);
      if (reclen == 0) return nullptr;  // a kernel that did this would make us loop
      at_ += reclen;
      const char* name = entry + kDirentName;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      *type = static_cast<unsigned char>(entry[kDirentType]);
      return name;
    }
  }

 private:
  int fd_;
  long size_ = 0;
  long at_ = 0;
  alignas(8) char buffer_[4096];
};

// What remove_tree_at needs of an entry, not following a link. statx also
// names the mount (Linux 5.8+), which tells a bind mount of the same file
// system, where st_dev does not.
struct TreeEntry {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t mount = 0;  // 0: the kernel does not say
  mode_t mode = 0;
  uid_t uid = 0;
};

bool tree_entry_at(int dir, const char* name, TreeEntry* out) {
  struct statx sx {};
  const int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  if (::statx(dir, name, flags, STATX_TYPE | STATX_MODE | STATX_UID | STATX_INO | STATX_MNT_ID, &sx) != 0) return false;
  out->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  out->ino = sx.stx_ino;
  out->mount = (sx.stx_mask & STATX_MNT_ID) != 0 ? sx.stx_mnt_id : 0;
  out->mode = sx.stx_mode;
  out->uid = sx.stx_uid;
  return true;
}

bool same_mount(const TreeEntry& a, const TreeEntry& b) {
  return a.dev == b.dev && (a.mount == 0 || b.mount == 0 || a.mount == b.mount);
}

// A worker can mkdir a folder with mode 0: to list, empty or move it (which
// rewrites its ".."), its owner first makes it 0700. AT_SYMLINK_NOFOLLOW: if
// a link took the folder's name meanwhile, glibc refuses rather than change
// what it points at (it chmods the O_PATH descriptor through /proc; without
// /proc the folder stays as it is, and so does the tree).
void let_owner_in(int dir, const char* name, const TreeEntry& entry) {
  if (entry.uid == ::geteuid() && (entry.mode & S_IRWXU) != S_IRWXU) ::fchmodat(dir, name, S_IRWXU, AT_SYMLINK_NOFOLLOW);
}

// Folder `name` of `dir`, which `entry` describes, opened to be listed; -1
// when it cannot be, or is no longer that folder.
int open_tree_folder(int dir, const char* name, const TreeEntry& entry) {
  let_owner_in(dir, name, entry);
  const int fd = ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  TreeEntry opened;
  if (fd >= 0 && (!tree_entry_at(fd, "", &opened) || opened.ino != entry.ino || !same_mount(opened, entry))) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The name in the top folder of a folder moved up there: unique while it
// lives, as its inode is.
struct MovedName {
  char text[32];
  explicit MovedName(ino_t ino) {
    constexpr char kPrefix[] = ".tsarchive-rm-";
    std::memcpy(text, kPrefix, sizeof kPrefix - 1);
    size_t at = sizeof kPrefix - 1;
    for (int shift = 60; shift >= 0; shift -= 4) text[at++] = "0123456789abcdef"[(static_cast<uint64_t>(ino) >> shift) & 15];
    text[at] = '\0';
  }
};

// How remove_tree_at takes a tree apart with no path, no allocation and two
// descriptors of its own: it only ever empties a folder one level below the top, moving
// that folder's own folders up into the top (a rename within one file
// system), so nothing is deeper than two levels when it is reached, and
// nothing above the top is ever reached ("..", where a folder moved
// meanwhile could lead elsewhere, is never opened). The folders just moved
// are taken next (a stack, so a chain goes a folder at a time); those past
// its room are found by the next pass over the top.
struct TreeRemoval {
  TreeRemoval(int top_fd, const TreeEntry& entry) : top(top_fd), top_entry(entry) {}

  int top;
  TreeEntry top_entry;
  static constexpr int kRoom = 64;
  ino_t moved[kRoom];  // [0, moved_count) are set
  int moved_count = 0;

  // Removes entry `name` of the top (its files and links, its folders moved
  // up), given its d_type. Whether anything changed.
  bool clear(const char* name, unsigned char type) {
    if (type != DT_DIR && type != DT_UNKNOWN) {
      if (::unlinkat(top, name, 0) == 0) return true;
      if (errno != EISDIR) return false;  // gone, or given up
    }
    TreeEntry entry;
    if (!tree_entry_at(top, name, &entry)) return false;
    if (!S_ISDIR(entry.mode)) return ::unlinkat(top, name, 0) == 0;
    // Another file system or mount (not ours to empty), or the top itself
    // mounted inside it (where moving up would change nothing, forever).
    if (!same_mount(entry, top_entry) || entry.ino == top_entry.ino) return false;
    bool changed = false;
    {
      const Fd folder(open_tree_folder(top, name, entry));
      if (folder.get() >= 0) changed = empty(folder.get());
    }
    return ::unlinkat(top, name, AT_REMOVEDIR) == 0 || changed;
  }

  bool empty(int folder) {
    bool changed = false;
    FolderEntries entries(folder);
    unsigned char type = DT_UNKNOWN;
    while (const char* name = entries.next(&type)) {
      if (type != DT_DIR && type != DT_UNKNOWN) {
        if (::unlinkat(folder, name, 0) == 0) {
          changed = true;
          continue;
        }
        if (errno != EISDIR) continue;
      }
      TreeEntry entry;
      if (!tree_entry_at(folder, name, &entry)) continue;
      if (!S_ISDIR(entry.mode)) {
        changed |= ::unlinkat(folder, name, 0) == 0;
        continue;
      }
      if (!same_mount(entry, top_entry)) continue;
      let_owner_in(folder, name, entry);
      if (::renameat(folder, name, top, MovedName(entry.ino).text) != 0) continue;  // given up (this pass)
      changed = true;
      if (moved_count < kRoom) moved[moved_count++] = entry.ino;
    }
    return changed;
  }

  // Passes over the top until one changes nothing: a static tree runs out of
  // moves (each makes a folder shallower) and of removals, so this ends, with
  // what could not be removed given up.
  void run() {
    for (bool changed = true; changed;) {
      changed = false;
      if (::lseek(top, 0, SEEK_SET) != 0) return;
      FolderEntries entries(top);
      unsigned char type = DT_UNKNOWN;
      while (const char* name = entries.next(&type)) {
        changed |= clear(name, type);
        while (moved_count > 0) changed |= clear(MovedName(moved[--moved_count]).text, DT_DIR);
      }
    }
  }
};

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
  return remove_tree_at(dir_fd, name.c_str());  // a staging folder with whatever a worker made in it
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

void write_stderr(const char* text, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
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
  remove_tree_at(g_staging_parent_fd, g_staging_name);
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

std::string megabytes(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

bool remove_tree_at(int parent_fd, const char* name) {
  TreeEntry top_entry;
  if (!tree_entry_at(parent_fd, name, &top_entry)) return errno == ENOENT;
  if (!S_ISDIR(top_entry.mode)) return ::unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT;
  {
    const Fd top(open_tree_folder(parent_fd, name, top_entry));
    if (top.get() >= 0) TreeRemoval(top.get(), top_entry).run();
  }
  return ::unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
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

TempFile::TempFile(const std::string& dir, const std::string& base, const std::string& shown_name,
                   const char* elsewhere)
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
  arm();
}

TempFile::TempFile(Adopt, int fd, std::string path, std::string shown_name)
    : path_(std::move(path)), shown_(std::move(shown_name)) {
  if (path_.size() >= sizeof g_temp_path) throw_io("the path is too long", shown_);
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0) throw_io("cannot keep the file open: " + errno_text(), shown_, "check the process's file limit (ulimit -n)");
  arm();
}

void TempFile::arm() {
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

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
  g_temp_armed = 0;
  for (size_t i = 0; i < std::size(kCleanupSignals); ++i) ::sigaction(kCleanupSignals[i], &saved_[i], nullptr);
  ::sigaction(SIGXFSZ, &saved_xfsz_, nullptr);
}

void TempFile::set_mode(mode_t mode, const struct stat* owner) {
  if (owner != nullptr && ::geteuid() == 0) {
    if (::fchown(fd_, owner->st_uid, owner->st_gid) != 0) { /* keep root's: the mode still applies */ }
  }
  const mode_t kept = owner != nullptr ? 07777 : 0777;
  if (::fchmod(fd_, mode & kept) != 0) throw_io("cannot set the file mode: " + errno_text(), shown_);
}

std::vector<std::string> TempFile::copy_attributes_from(int from) {
  std::vector<std::string> lost;
  const ssize_t listed = ::flistxattr(from, nullptr, 0);
  if (listed <= 0) return lost;  // none, or a file system without them
  std::string names(static_cast<size_t>(listed), '\0');
  const ssize_t got = ::flistxattr(from, names.data(), names.size());
  if (got < 0) return lost;
  names.resize(static_cast<size_t>(got));
  for (size_t at = 0; at < names.size();) {
    const std::string name(names.c_str() + at);
    at += name.size() + 1;
    const ssize_t size = ::fgetxattr(from, name.c_str(), nullptr, 0);
    std::string value(size > 0 ? static_cast<size_t>(size) : 0, '\0');
    const ssize_t read = size < 0 ? -1 : ::fgetxattr(from, name.c_str(), value.data(), value.size());
    if (read < 0 || ::fsetxattr(fd_, name.c_str(), value.data(), static_cast<size_t>(read), 0) != 0) {
      lost.push_back(name);
    }
  }
  return lost;
}

void TempFile::commit(const std::string& final_path, const std::string& dir) {
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

SignalHold::SignalHold() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kCleanupSignals) sigaddset(&set, sig);
  ::sigprocmask(SIG_BLOCK, &set, &saved_);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &saved_xfsz_);
}

SignalHold::~SignalHold() {
  ::sigaction(SIGXFSZ, &saved_xfsz_, nullptr);
  ::sigprocmask(SIG_SETMASK, &saved_, nullptr);
}

// libtorch 1.13 does not survive a failed write while it saves: on a full
// disk its PyTorchStreamWriter throws again from its destructor
// (std::terminate, a core dump); under a file size limit it writes a
// truncated file and reports nothing. So a libtorch save starts only when
// there is room for its copy and for the final temp file, each about
// `copy_bytes`, and the file size limit allows one.
void require_room_for_copies(const std::string& dir, uint64_t copy_bytes, const std::string& shown) {
  // A re-save may come out a little larger; a size past any disk stays one.
  const uint64_t copy = copy_bytes >= (UINT64_MAX >> 2) ? (UINT64_MAX >> 2) : copy_bytes + copy_bytes / 16 + (1 << 20);
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

bool content_lock_free(int fd, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 1;
  if (::fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;  // no record locks here: as try_content_lock
  return lock.l_type == F_UNLCK;
}

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
    remove_tree_at(parent, path_.substr(path_.rfind('/') + 1).c_str());
    ::close(parent);
  }
  if (fd_ >= 0) ::close(fd_);
}

int remove_leftovers_next_to(const std::string& path) {
  const auto [dir, base] = split_path(path);
  return remove_leftovers(dir, base);
}

}  // namespace tsarchive
