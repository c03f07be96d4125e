// extra/ files to and from a folder (extra export / extra import).
//
// Names map to paths below the folder, "config/train.yaml" to
// DIR/config/train.yaml. Nothing is ever written or read outside the folder:
// names must pass extra_name_problem (no '..', no absolute paths, no
// backslashes, no NUL), every folder below DIR is opened with O_NOFOLLOW, and
// existing links or special files in the way are refused, not replaced.
// An archive is anyone's file, so existing files are not replaced, hidden
// names (.git/config) not written, unless --force; and never the archive
// itself (ExportRules, extra.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/posix_fd.h"
#include "base/error.h"
#include "core/edit/extra.h"

namespace tsarchive {
namespace {

constexpr size_t kMaxImportFiles = 10000;
constexpr int kMaxImportDepth = 32;


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

// A link or a special file where export writes: refused, never replaced.
[[noreturn]] void refuse_in_the_way(const struct stat& st, bool want_folder, const std::string& shown) {
  throw_io(S_ISLNK(st.st_mode)  ? "refusing to write through or replace a symbolic link"
           : want_folder        ? "refusing to write through a file where a folder should be"
                                : "refusing to replace something that is not a file",
           shown, "nothing was exported; remove it, or export into an empty folder");
}

// Opens (creating if needed) the folder `part` below `parent`, refusing links.
Fd open_subdir(int parent, const std::string& part, const std::string& shown) {
  if (::mkdirat(parent, part.c_str(), 0777) != 0 && errno != EEXIST) {
    throw_io("cannot create the folder: " + errno_text(), shown);
  }
  const int fd = ::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    struct stat st {};
    if ((errno == ELOOP || errno == ENOTDIR) && ::fstatat(parent, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      refuse_in_the_way(st, true, shown);
    }
    throw_io("cannot open the folder: " + errno_text(), shown);
  }
  return Fd(fd);
}

// A refusal of one extra file that --force would allow (exit 2): names the
// file, where it would go and the archive.
[[noreturn]] void refuse_unless_forced(const std::string& name, const std::string& why, const std::string& archive,
                                       const std::string& hint) {
  throw Error(ErrorKind::Usage, "extra file '" + name + "' " + why, archive, "nothing was exported; " + hint);
}

// A part of the name that starts with '.': a hidden file or folder (.git,
// .bashrc, .ssh), which programs read without anyone looking at it. Names
// have passed extra_name_problem: no empty parts.
bool has_hidden_part(const std::string& name) { return name.front() == '.' || name.find("/.") != std::string::npos; }

bool is_archive(const struct stat& st, const ExportRules& rules) {
  return rules.archive_file && static_cast<uint64_t>(st.st_dev) == rules.archive_file->first &&
         static_cast<uint64_t>(st.st_ino) == rules.archive_file->second;
}

// Before anything is written: every folder on the way to DIR/name that exists
// is a real folder, and DIR/name is absent, or a regular file that `rules`
// lets export replace and that is not the archive itself.
void check_export_target(int root_fd, const std::string& prefix, const std::string& name, const ExportRules& rules,
                         const std::string& archive) {
  Fd current(::dup(root_fd));
  size_t begin = 0;
  for (size_t slash = name.find('/');; slash = name.find('/', begin)) {
    const bool folder = slash != std::string::npos;
    const std::string part = name.substr(begin, folder ? slash - begin : std::string::npos);
    const std::string shown = prefix + name.substr(0, folder ? slash : std::string::npos);
    struct stat st {};
    if (::fstatat(current.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // made fresh
    if (folder ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) refuse_in_the_way(st, folder, shown);
    if (!folder) {
      if (is_archive(st, rules)) {
        throw Error(ErrorKind::Usage, "extra file '" + name + "' would replace the archive itself, " + shown, archive,
                    "nothing was exported; export into another folder");
      }
      if (!rules.force) {
        refuse_unless_forced(name, "would replace the existing file " + shown, archive,
                             "pass --force to replace it, or export into another folder");
      }
      return;
    }
    current = Fd(::openat(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (current.get() < 0) throw_io("cannot open the folder: " + errno_text(), shown);
    begin = slash + 1;
  }
}

// Moves the written temp file to `leaf`. Without `replace`, a file that
// appeared there since the checks is not replaced (RENAME_NOREPLACE, where
// the file system has it).
bool move_into_place(int dir_fd, const std::string& temp, const std::string& leaf, bool replace) {
  if (!replace && ::renameat2(dir_fd, temp.c_str(), dir_fd, leaf.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (!replace && errno != EINVAL && errno != ENOSYS) return false;
  return ::renameat(dir_fd, temp.c_str(), dir_fd, leaf.c_str()) == 0;
}

void write_below(int dir_fd, const std::string& leaf, const std::string& bytes, const std::string& shown,
                 const ExportRules& rules) {
  struct stat st {};
  if (::fstatat(dir_fd, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISREG(st.st_mode)) refuse_in_the_way(st, false, shown);
    if (is_archive(st, rules)) throw_usage("the archive appeared at " + shown + " while it was being exported");
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
  if (::fsync(fd.get()) != 0 || !move_into_place(dir_fd, temp, leaf, rules.force)) {
    const std::string why = errno == EEXIST ? "a file appeared there meanwhile; it was left as it is" : errno_text();
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
    // Look, then open without following links and without blocking (a FIFO
    // swapped in meanwhile opens at once), then check what was opened.
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_io("cannot stat: " + errno_text(), shown);
    if (S_ISLNK(st.st_mode)) {
      throw_bad_input("refusing to import a symbolic link", shown, "import reads regular files only; copy the target in");
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      throw_bad_input("refusing to import something that is not a regular file", shown);
    }
    Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat opened {};
    if (fd.get() < 0 || ::fstat(fd.get(), &opened) != 0) throw_io("cannot open: " + errno_text(), shown);
    if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
      throw_io("the file was replaced while the folder was being read", shown, "run the command again");
    }
    if (S_ISDIR(opened.st_mode)) {
      read_tree(fd.get(), rel + "/", root, depth + 1, max_size, out);
      continue;
    }
    if (auto problem = extra_name_problem(rel)) {
      throw_bad_input("cannot import this file as an extra file: " + *problem, shown, "rename it");
    }
    const auto too_large = [&](uint64_t size) {
      throw_usage("'" + shown + "' is " + std::to_string(size) + " bytes, above the " + std::to_string(max_size) +
                      "-byte limit for an extra file",
                  "pass --force to store it anyway");
    };
    if (static_cast<uint64_t>(opened.st_size) > max_size) too_large(static_cast<uint64_t>(opened.st_size));
    if (out.size() >= kMaxImportFiles) throw_bad_input("more than " + std::to_string(kMaxImportFiles) + " files to import", root);
    // Read what is there, up to one byte past the limit: a file that grows
    // meanwhile cannot make us read without bound.
    std::string bytes(static_cast<size_t>(std::min<uint64_t>(max_size + 1, static_cast<uint64_t>(opened.st_size) + 1)), '\0');
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_io("cannot read: " + errno_text(), shown);
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    if (done > max_size) too_large(done);
    bytes.resize(done);
    out.push_back(ExtraEdit{rel, std::move(bytes)});
  }
}

}  // namespace

std::vector<ExportedFile> export_extra_files(const TorchArchive& archive, const std::string& dir,
                                             const ExportRules& rules) {
  std::string base = dir;  // "meta/" names files meta/config/train.yaml, not meta//config/train.yaml
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string prefix = base == "/" ? base : base + "/";
  // Every name is checked before anything is written.
  std::vector<const Record*> records;
  std::vector<std::string> names;
  for (const Record& r : archive.records()) {
    if (r.kind != RecordKind::Extra) continue;
    const std::string name = r.extra_name();
    if (auto problem = extra_name_problem(name)) {
      throw_bad_input("the archive has an extra file whose name is not safe to write ('" + name.substr(0, 80) + "'): " + *problem,
                      archive.path(), "nothing was exported; read the files one by one with 'extra get'");
    }
    if (!rules.force && has_hidden_part(name)) {
      refuse_unless_forced(name, "would be written to " + prefix + name + ", a hidden name (a part starts with '.')",
                           archive.path(), "pass --force to write it anyway, or read it with 'extra get'");
    }
    records.push_back(&r);
    names.push_back(name);
  }
  // A name that is a folder of another: each folder along each name, looked up
  // (not every pair: an archive may hold a great many extra files).
  const std::unordered_set<std::string_view> files(names.begin(), names.end());
  for (const std::string& b : names) {
    for (size_t slash = b.find('/'); slash != std::string::npos; slash = b.find('/', slash + 1)) {
      const std::string_view a = std::string_view(b).substr(0, slash);
      if (files.count(a) != 0) {
        throw_bad_input("extra files '" + std::string(a) + "' and '" + b + "' need '" + std::string(a) +
                            "' to be both a file and a folder",
                        archive.path(), "nothing was exported; read them one by one with 'extra get'");
      }
    }
  }

  make_dirs(dir);
  Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) throw_io("cannot open the folder: " + errno_text(), dir);
  for (const std::string& name : names) check_export_target(root.get(), prefix, name, rules, archive.path());
  std::vector<ExportedFile> out;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string& name = names[i];
    const std::string shown = prefix + name;
    const std::string bytes = archive.read(*records[i], rules.max_size);
    Fd current(::dup(root.get()));
    size_t begin = 0;
    for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', begin)) {
      current = open_subdir(current.get(), name.substr(begin, slash - begin), prefix + name.substr(0, slash));
      begin = slash + 1;
    }
    write_below(current.get(), name.substr(begin), bytes, shown, rules);
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
