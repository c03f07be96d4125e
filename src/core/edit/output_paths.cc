#include "core/edit/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <utility>

#include "base/error.h"
#include "format/byte_source.h"

namespace tsarchive {
namespace {

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// What writing `path` replaces or creates: the file there, or else the name
// in its folder (two outputs that make one new file: same folder, same
// name). Empty when the folder does not exist either: that write fails anyway.
struct OutputTarget {
  bool exists = false;
  struct stat file {};    // exists
  struct stat folder {};  // !exists
  std::string name;       // !exists
};

std::optional<OutputTarget> output_target(const std::string& path) {
  OutputTarget t;
  if (::lstat(path.c_str(), &t.file) == 0) {
    t.exists = true;
    return t;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  t.name = path.substr(slash + 1);  // npos + 1 == 0
  if (t.name.empty() || ::stat(dir.c_str(), &t.folder) != 0) return std::nullopt;
  return t;
}

bool same_target(const OutputTarget& a, const OutputTarget& b) {
  if (a.exists != b.exists) return false;
  return a.exists ? same_file(a.file, b.file) : same_file(a.folder, b.folder) && a.name == b.name;
}

// An input as the command will read it: links followed; "-" is what
// standard input is (a file redirected with '<' is that file).
bool input_status(const std::string& path, struct stat* st) {
  if (is_standard_stream(path)) return ::fstat(STDIN_FILENO, st) == 0 && S_ISREG(st->st_mode);
  return ::stat(path.c_str(), st) == 0;
}

std::string named(const NamedPath& p) { return p.role + " " + p.path; }

}  // namespace

void refuse_link_output(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    throw_usage(path + " is a symbolic link; tsarchive does not write through links", "give the real path");
  }
}

void refuse_special_output(const std::string& shown, const struct stat& st) {
  const char* what = S_ISFIFO(st.st_mode)                         ? "a pipe"
                     : S_ISSOCK(st.st_mode)                       ? "a socket"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                  : nullptr;
  if (what != nullptr) {
    throw_usage(shown + " is " + what + ", not a regular file; tsarchive writes its outputs to regular files",
                "give the path of a file");
  }
}

void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  std::vector<std::pair<const NamedPath*, OutputTarget>> seen;
  for (const NamedPath& out : outputs) {
    if (out.path.empty() || is_standard_stream(out.path)) continue;
    refuse_link_output(out.path);
    const std::optional<OutputTarget> target = output_target(out.path);
    if (!target) continue;
    if (target->exists) refuse_special_output(named(out), target->file);
    for (const NamedPath& in : inputs) {
      struct stat st {};
      if (!in.path.empty() && target->exists && input_status(in.path, &st) && same_file(st, target->file)) {
        throw_usage(named(out) + " is " + named(in) + " (the same file): writing it would destroy what the command reads",
                    "write to another file");
      }
    }
    for (const auto& [other, other_target] : seen) {
      if (same_target(*target, other_target)) {
        throw_usage(named(*other) + " and " + named(out) + " are the same file: it would keep only one of them",
                    "give each its own file");
      }
    }
    seen.emplace_back(&out, *target);
  }
}

}  // namespace tsarchive
