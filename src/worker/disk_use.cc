// What a worker holds on disk; see disk_use.h for why and what counts.
#include "worker/disk_use.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "base/strings.h"

namespace tsarchive {
namespace {

using Inode = std::pair<dev_t, ino_t>;

class Tally {
 public:
  // Counts `st` unless its inode was counted: hard links, a file both in a
  // folder and open.
  void add(const struct stat& st, bool in_memory) {
    if (!seen_.insert({st.st_dev, st.st_ino}).second) return;
    add_bytes({st.st_dev, st.st_ino}, static_cast<uint64_t>(st.st_blocks) * 512, in_memory);
  }
  // The same for an inode known only by a mapping (count_mapped_unlinked).
  void add_bytes(const Inode& inode, uint64_t bytes, bool in_memory) {
    use.bytes += bytes;
    if (in_memory) {
      use.memory_bytes += bytes;
      memory_inodes[inode] += bytes;
    }
  }
  bool seen(const Inode& inode) const { return seen_.count(inode) != 0; }
  bool done() const { return use.too_deep || use.entries > kMaxWorkerEntries; }

  DiskUse use;
  std::map<Inode, uint64_t> memory_inodes;  // those counted in use.memory_bytes, and their bytes

 private:
  std::set<Inode> seen_;
};

// Whether what the descriptor (or path) names lives in memory: tmpfs (a /tmp
// that is one), ramfs, or the kernel's own shmem mount that holds memfds.
bool in_memory(const struct statfs& fs) {
  return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC;
}

// Everything below the open folder `fd` (taken over), not following links;
// `memory`: the folder is on a file system in memory.
void walk(int fd, int depth, bool memory, Tally& tally) {
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return;
  }
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
    if (++tally.use.entries > kMaxWorkerEntries) break;
    struct stat st {};
    // Gone since readdir (the worker removes what it unpacked): nothing to count.
    if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    tally.add(st, memory);
    if (!S_ISDIR(st.st_mode)) continue;
    if (depth + 1 > kMaxWorkerFolderDepth) {
      tally.use.too_deep = true;
      break;
    }
    const int sub = ::openat(::dirfd(dir), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) walk(sub, depth + 1, memory, tally);
    if (tally.done()) break;
  }
  ::closedir(dir);
}

// Whether `path`, as /proc names a file with no link left ("... (deleted)"
// stripped), is one the worker made: in one of its folders (real paths),
// or a memfd. A library that was replaced on disk while mapped is not.
bool made_by_worker(const std::string& path, const std::vector<std::string>& real_folders) {
  if (path.rfind("/memfd:", 0) == 0) return true;
  for (const std::string& folder : real_folders) {
    if (path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 && path[folder.size()] == '/') {
      return true;
    }
  }
  return false;
}

constexpr const char kDeleted[] = " (deleted)";

std::string without_deleted(std::string path) {
  constexpr size_t n = sizeof kDeleted - 1;
  if (path.size() >= n && path.compare(path.size() - n, n, kDeleted) == 0) path.resize(path.size() - n);
  return path;
}

// Files the worker has open with no link left (unlinked, memfd, O_TMPFILE).
// stat() through /proc/PID/fd/N reaches the file itself.
void count_open_unlinked(pid_t pid, const std::vector<std::string>& real_folders, Tally& tally) {
  const std::string folder = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) return;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string link = folder + "/" + entry->d_name;
    struct stat st {};
    if (::stat(link.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0) continue;
    char target[4096];
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    struct statfs fs {};
    if (n > 0 && made_by_worker(without_deleted(std::string(target, static_cast<size_t>(n))), real_folders)) {
      tally.add(st, ::statfs(link.c_str(), &fs) == 0 && in_memory(fs));
    }
  }
  ::closedir(dir);
}

// Mapped files with no link left that no descriptor holds (mapped, closed,
// unlinked), by the furthest byte a mapping reaches: /proc/PID/maps says
// "start-end perms offset major:minor inode path (deleted)". Anonymous
// shared memory ("/dev/zero (deleted)", "/SYSV...") is memory, which
// --memory-limit counts, and is not the worker's to name anyway.
// `memory_folders`: those of `real_folders` on a file system in memory.
void count_mapped_unlinked(pid_t pid, const std::vector<std::string>& real_folders,
                           const std::vector<std::string>& memory_folders, Tally& tally) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::map<Inode, std::pair<uint64_t, bool>> reach;  // the furthest byte mapped; in memory
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < sizeof kDeleted || line.compare(line.size() - (sizeof kDeleted - 1), std::string::npos, kDeleted) != 0) {
      continue;
    }
    uint64_t start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &start, &end, perms,
                    &offset, &major, &minor, &inode, &path_at) < 7 ||
        inode == 0 || end < start) {
      continue;
    }
    const std::string path = without_deleted(line.substr(static_cast<size_t>(path_at)));
    if (!made_by_worker(path, real_folders)) continue;
    const Inode key{::makedev(major, minor), static_cast<ino_t>(inode)};
    if (tally.seen(key)) continue;
    auto& [furthest, memory] = reach[key];
    furthest = std::max(furthest, offset + (end - start));
    memory = memory || made_by_worker(path, memory_folders);  // a memfd, or in a folder in memory
  }
  for (const auto& [inode, extent] : reach) tally.add_bytes(inode, extent.first, extent.second);
}

// How much of the files in memory the worker has mapped and resident, from
// /proc/PID/smaps: a mapping's header ("start-end perms offset major:minor
// inode path") is followed by its "Rss:" line and later its "Anonymous:"
// one, the pages a private mapping copied on write (RssAnon, not the file's).
// Each file's at most its bytes.
uint64_t mapped_resident(pid_t pid, const std::map<Inode, uint64_t>& memory_inodes) {
  std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps");
  std::map<Inode, uint64_t> resident;
  const Inode* current = nullptr;
  Inode header{};
  std::string line;
  while (std::getline(smaps, line)) {
    uint64_t start = 0, end = 0, offset = 0, inode = 0, kib = 0;
    unsigned major = 0, minor = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64, &start, &end, perms, &offset,
                    &major, &minor, &inode) == 7) {
      header = {::makedev(major, minor), static_cast<ino_t>(inode)};
      current = memory_inodes.count(header) != 0 ? &header : nullptr;
    } else if (current != nullptr && std::sscanf(line.c_str(), "Rss: %" SCNu64 " kB", &kib) == 1) {
      resident[*current] += kib * 1024;
    } else if (current != nullptr && std::sscanf(line.c_str(), "Anonymous: %" SCNu64 " kB", &kib) == 1) {
      resident[*current] -= std::min(resident[*current], kib * 1024);
      current = nullptr;
    }
  }
  uint64_t total = 0;
  for (const auto& [inode, bytes] : resident) total += std::min(bytes, memory_inodes.at(inode));
  return total;
}

}  // namespace

DiskUse measure_disk_use(pid_t pid, const std::vector<std::string>& folders) {
  Tally tally;
  std::vector<std::string> real_folders, memory_folders;
  for (const std::string& folder : folders) {
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct statfs fs {};
    const bool memory = ::fstatfs(fd, &fs) == 0 && in_memory(fs);
    if (char* real = ::realpath(folder.c_str(), nullptr)) {
      real_folders.emplace_back(real);
      if (memory) memory_folders.emplace_back(real);
      std::free(real);
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0) tally.add(st, memory);
    walk(fd, 0, memory, tally);
    if (tally.done()) return tally.use;
  }
  if (pid > 0) {
    count_open_unlinked(pid, real_folders, tally);
    count_mapped_unlinked(pid, real_folders, memory_folders, tally);
    if (!tally.memory_inodes.empty()) tally.use.memory_mapped_bytes = mapped_resident(pid, tally.memory_inodes);
  }
  return tally.use;
}

std::string disk_limit_passed(const DiskUse& use, uint64_t limit) {
  if (use.too_deep) {
    return "nested folders more than " + std::to_string(kMaxWorkerFolderDepth) + " deep in its temporary folder";
  }
  if (use.entries > kMaxWorkerEntries) {
    return "made more than " + std::to_string(kMaxWorkerEntries) + " files and folders in its temporary folder";
  }
  if (limit != 0 && use.bytes > limit) {
    // Bytes where the two would read the same ("6.00 MiB, more than ... 6.00 MiB").
    const std::string wrote = human_size(use.bytes) == human_size(limit) ? std::to_string(use.bytes) + " bytes"
                                                                          : human_size(use.bytes);
    return "wrote " + wrote + ", more than the disk limit (" + human_size(limit) + ", --disk-limit)";
  }
  return {};
}

namespace {

// Lowers the resource's soft and hard limits to at most `bound`.
void lower_limit(int resource, rlim_t bound) {
  struct rlimit now {};
  if (::getrlimit(resource, &now) != 0) return;
  const auto lower = [bound](rlim_t value) { return value == RLIM_INFINITY || value > bound ? bound : value; };
  const struct rlimit bounded = {lower(now.rlim_cur), lower(now.rlim_max)};
  ::setrlimit(resource, &bounded);
}

}  // namespace

void limit_worker_files(uint64_t disk_limit) {
  if (disk_limit != 0) lower_limit(RLIMIT_FSIZE, static_cast<rlim_t>(disk_limit));
  lower_limit(RLIMIT_NOFILE, kMaxWorkerDescriptors);
}

}  // namespace tsarchive
