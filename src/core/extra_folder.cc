// extra/ files to and from a folder (extra export / extra import).
//
// Names map to paths below the folder, "config/train.yaml" to
// DIR/config/train.yaml. Nothing is ever written or read outside the folder:
// names must pass extra_name_problem (no '..', no absolute paths, no
// backslashes, no NUL), every folder below DIR is opened with O_NOFOLLOW, and
// existing links or special files in the way are refused, not replaced.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "tsarchive/error.h"
#include "tsarchive/extra.h"

namespace tsarchive {
namespace {

constexpr size_t kMaxImportFiles = 10000;
constexpr int kMaxImportDepth = 32;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text() { return std::strerror(errno); }

void make_dirs(const std::string& dir) {
  std::string path;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty()) continue;
    if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
      throw_io("cannot create the folder: " + errno_text(), path, "check the path and its permissions");
    }
  }
}

// Opens (creating if needed) the folder `part` below `parent`, refusing links.
Fd open_subdir(int parent, const std::string& part, const std::string& shown) {
  if (::mkdirat(parent, part.c_str(), 0777) != 0 && errno != EEXIST) {
    throw_io("cannot create the folder: " + errno_text(), shown);
  }
  const int fd = ::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      throw_io("refusing to write through a link or a file where a folder should be", shown,
               "remove it, or export into an empty folder");
    }
    throw_io("cannot open the folder: " + errno_text(), shown);
  }
  return Fd(fd);
}

void write_below(int dir_fd, const std::string& leaf, const std::string& bytes, const std::string& shown) {
  struct stat st {};
  if (::fstatat(dir_fd, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    throw_io(S_ISLNK(st.st_mode) ? "refusing to replace a symbolic link" : "refusing to replace something that is not a file",
             shown, "remove it, or export into an empty folder");
  }
  static std::mt19937_64 rng(std::random_device{}());
  const std::string temp = "." + leaf.substr(0, 200) + ".tsarchive-" + std::to_string(rng() % 1000000000);
  Fd fd(::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
  if (fd.get() < 0) throw_io("cannot create a file: " + errno_text(), shown, "check the folder's permissions");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = errno_text();
      ::unlinkat(dir_fd, temp.c_str(), 0);
      throw_io("cannot write: " + why, shown, "free some disk space");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::renameat(dir_fd, temp.c_str(), dir_fd, leaf.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlinkat(dir_fd, temp.c_str(), 0);
    throw_io("cannot write: " + why, shown);
  }
}

void read_tree(int dir_fd, const std::string& prefix, const std::string& root, int depth, uint64_t max_size,
               std::vector<ExtraEdit>& out) {
  if (depth > kMaxImportDepth) throw_bad_input("folders nest more than " + std::to_string(kMaxImportDepth) + " deep", root + "/" + prefix);
  const int list_fd = ::dup(dir_fd);
  DIR* dir = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
  if (dir == nullptr) throw_io("cannot list the folder: " + errno_text(), root + "/" + prefix);
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string rel = prefix + name;
    const std::string shown = root + "/" + rel;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_io("cannot stat: " + errno_text(), shown);
    if (S_ISLNK(st.st_mode)) {
      throw_bad_input("refusing to import a symbolic link", shown, "import reads regular files only; copy the target in");
    }
    if (S_ISDIR(st.st_mode)) {
      Fd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() < 0) throw_io("cannot open the folder: " + errno_text(), shown);
      read_tree(sub.get(), rel + "/", root, depth + 1, max_size, out);
      continue;
    }
    if (!S_ISREG(st.st_mode)) throw_bad_input("refusing to import something that is not a regular file", shown);
    if (auto problem = extra_name_problem(rel)) {
      throw_bad_input("cannot import this file as an extra file: " + *problem, shown, "rename it");
    }
    if (static_cast<uint64_t>(st.st_size) > max_size) {
      throw_usage("'" + shown + "' is " + std::to_string(st.st_size) + " bytes, above the " + std::to_string(max_size) +
                      "-byte limit for an extra file",
                  "pass --force to store it anyway");
    }
    if (out.size() >= kMaxImportFiles) throw_bad_input("more than " + std::to_string(kMaxImportFiles) + " files to import", root);
    Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) throw_io("cannot open: " + errno_text(), shown);
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_io("cannot read: " + errno_text(), shown);
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    bytes.resize(done);
    out.push_back(ExtraEdit{rel, std::move(bytes)});
  }
}

}  // namespace

std::vector<ExportedFile> export_extra_files(const TorchArchive& archive, const std::string& dir, uint64_t max_size) {
  // Every name is checked before anything is written.
  std::vector<const Record*> records;
  std::vector<std::string> names;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Extra) continue;
    const std::string name = r.name.substr(6);
    if (auto problem = extra_name_problem(name)) {
      throw_bad_input("the archive has an extra file whose name is not safe to write ('" + name.substr(0, 80) + "'): " + *problem,
                      archive.path(), "nothing was exported; read the files one by one with 'extra get'");
    }
    records.push_back(&r);
    names.push_back(name);
  }
  for (const std::string& a : names) {
    for (const std::string& b : names) {
      if (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '/') {
        throw_bad_input("extra files '" + a + "' and '" + b + "' need '" + a + "' to be both a file and a folder",
                        archive.path(), "nothing was exported; read them one by one with 'extra get'");
      }
    }
  }

  make_dirs(dir);
  Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) throw_io("cannot open the folder: " + errno_text(), dir);
  std::vector<ExportedFile> out;
  std::string base = dir;  // "meta/" names files meta/config/train.yaml, not meta//config/train.yaml
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string prefix = base == "/" ? base : base + "/";
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string& name = names[i];
    const std::string shown = prefix + name;
    const std::string bytes = archive.read(*records[i], max_size);
    Fd current(::dup(root.get()));
    size_t begin = 0;
    for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', begin)) {
      current = open_subdir(current.get(), name.substr(begin, slash - begin), prefix + name.substr(0, slash));
      begin = slash + 1;
    }
    write_below(current.get(), name.substr(begin), bytes, shown);
    out.push_back(ExportedFile{name, shown, bytes.size()});
  }
  return out;
}

std::vector<ExtraEdit> read_extra_folder(const std::string& dir, uint64_t max_size) {
  Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) {
    if (errno == ENOENT) throw_io("no such folder", dir, "check the path");
    if (errno == ENOTDIR) throw_usage("not a folder: " + dir, "extra import reads a folder made by 'extra export'");
    throw_io("cannot open the folder: " + errno_text(), dir);
  }
  std::vector<ExtraEdit> out;
  std::string shown = dir;
  while (shown.size() > 1 && shown.back() == '/') shown.pop_back();
  read_tree(root.get(), "", shown, 0, max_size, out);
  return out;
}

}  // namespace tsarchive
