// Removing what a worker may have planted in its folders (remove_tree_at,
// base/temp_files_and_locks.h): folders deeper than PATH_MAX, folders of mode
// 0, links to elsewhere. The worker may run hostile native code, so its staging
// folder (StagingFolder, also when interrupted by a signal, and as a killed
// run's leftover) and its temporary folder (WorkerTempFolder) must go with
// whatever it made in them, without following a link out of them.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "base/posix_fd.h"
#include "base/temp_files_and_locks.h"
#include "helpers.h"
#include "worker/sandbox.h"

using namespace tsarchive;

namespace {

constexpr int kPlantedDepth = 3000;        // 3000 names of 8 characters: far past PATH_MAX (4096)
constexpr uid_t kNobody = 65534;           // nobody / nogroup on Debian
constexpr char kChainName[] = "deep0001";  // 8 characters

// A scratch folder for a tree the code under test may fail to remove: the
// fallback is rm -rf, which copes with any depth, after chmod -R u+rwx (a
// failing test must not leave folders of mode 0 behind, nor let TempDir's
// std::filesystem::remove_all throw from its destructor).
struct PlantingGround {
  TempDir dir;
  ~PlantingGround() {
    const std::string quoted = "'" + dir.path.string() + "'";
    (void)std::system(("chmod -R u+rwx " + quoted + " 2>/dev/null; rm -rf " + quoted).c_str());
  }
  int open_folder() const { return ::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }
};

bool planted_file(int dir_fd, const char* name) {
  const int fd = ::openat(dir_fd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool written = ::write(fd, "planted", 7) == 7;
  return ::close(fd) == 0 && written;
}

// A chain of `levels` folders under `dir_fd`/`name`, a file at its bottom.
bool planted_chain(int dir_fd, const char* name, int levels) {
  if (::mkdirat(dir_fd, name, 0700) != 0) return false;
  Fd at(::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < levels && at.get() >= 0; ++i) {
    if (::mkdirat(at.get(), kChainName, 0700) != 0) return false;
    at = Fd(::openat(at.get(), kChainName, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  return at.get() >= 0 && planted_file(at.get(), "bottom");
}

// What a hostile worker leaves in folder `name` of `dir_fd` (made here): files,
// a folder with files, a chain deeper than PATH_MAX, a folder of mode 0 with
// files and a folder of mode 0 in it, and a link to `outside`.
bool planted_tree(int dir_fd, const char* name, const std::string& outside) {
  if (::mkdirat(dir_fd, name, 0700) != 0) return false;
  const Fd top(::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (top.get() < 0 || !planted_file(top.get(), "file") || ::mkdirat(top.get(), "sub", 0700) != 0) return false;
  const Fd sub(::openat(top.get(), "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (sub.get() < 0 || !planted_file(sub.get(), "a") || !planted_file(sub.get(), "b")) return false;
  if (!planted_chain(top.get(), "chain", kPlantedDepth)) return false;
  if (::mkdirat(top.get(), "locked", 0700) != 0) return false;
  {
    const Fd locked(::openat(top.get(), "locked", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (locked.get() < 0 || !planted_file(locked.get(), "x") || !planted_file(locked.get(), "y") ||
        ::mkdirat(locked.get(), "inner", 0700) != 0) {
      return false;
    }
    const Fd inner(::openat(locked.get(), "inner", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (inner.get() < 0 || !planted_file(inner.get(), "z") || ::fchmod(inner.get(), 0) != 0) return false;
    if (::fchmod(locked.get(), 0) != 0) return false;
  }
  return ::symlinkat(outside.c_str(), top.get(), "link") == 0 && ::symlinkat(outside.c_str(), sub.get(), "link") == 0;
}

bool names_anything(int dir_fd, const char* name) {
  struct stat st {};
  return ::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// Runs `body` (which returns an exit code) in a child as nobody, when we are
// root: there a folder of mode 0 is no obstacle, for a user it is. nullopt
// when we are not root (the test itself runs as a user) or the child cannot
// become nobody; otherwise the child's exit code (-1: killed).
template <typename Body>
std::optional<int> as_nobody(Body&& body) {
  if (::geteuid() != 0) return std::nullopt;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(77);
    ::_exit(body());
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A folder of `ground` that nobody owns, reachable by nobody.
std::string nobodys_folder(const PlantingGround& ground) {
  const std::string path = ground.dir.file("nobody");
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  REQUIRE(::chown(path.c_str(), kNobody, kNobody) == 0);
  REQUIRE(::chmod(ground.dir.path.c_str(), 0711) == 0);
  return path;
}

}  // namespace

TEST_CASE("remove_tree_at: a planted tree of any depth, folders of mode 0; links are not followed", "[remove_tree]") {
  PlantingGround ground, outside;
  REQUIRE(planted_file(Fd(outside.open_folder()).get(), "precious"));
  const Fd dir(ground.open_folder());
  REQUIRE(planted_tree(dir.get(), "tree", outside.dir.path.string()));

  CHECK(remove_tree_at(dir.get(), "tree"));
  CHECK_FALSE(names_anything(dir.get(), "tree"));
  CHECK(slurp(outside.dir.file("precious")) == "planted");  // the links' target is left as it was

  SECTION("a file, a link, or nothing at all") {
    REQUIRE(planted_file(dir.get(), "plain"));
    REQUIRE(::symlinkat(outside.dir.path.c_str(), dir.get(), "link") == 0);
    CHECK(remove_tree_at(dir.get(), "plain"));
    CHECK(remove_tree_at(dir.get(), "link"));
    CHECK(remove_tree_at(dir.get(), "never-was"));
    CHECK_FALSE(names_anything(dir.get(), "plain"));
    CHECK_FALSE(names_anything(dir.get(), "link"));
    CHECK(slurp(outside.dir.file("precious")) == "planted");
  }
}

TEST_CASE("remove_tree_at: as a user, for whom a folder of mode 0 is an obstacle", "[remove_tree]") {
  PlantingGround ground, outside;
  REQUIRE(planted_file(Fd(outside.open_folder()).get(), "precious"));
  const std::string mine = ::geteuid() == 0 ? nobodys_folder(ground) : ground.dir.path.string();
  const std::string target = outside.dir.path.string();
  const auto plant_and_remove = [&mine, &target]() -> int {
    const Fd dir(::open(mine.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!planted_tree(dir.get(), "tree", target)) return 2;
    if (!remove_tree_at(dir.get(), "tree")) return 3;
    return names_anything(dir.get(), "tree") ? 4 : 0;
  };
  const std::optional<int> code = as_nobody(plant_and_remove);
  if (::geteuid() == 0 && !code) {
    WARN("cannot become nobody here; a user's folders of mode 0 are not tested");
    return;
  }
  CHECK((code ? *code : plant_and_remove()) == 0);
  CHECK(slurp(outside.dir.file("precious")) == "planted");
}

TEST_CASE("remove_tree_at: what cannot be removed is given up, the rest goes, and it says false", "[remove_tree]") {
  if (::geteuid() != 0) {
    WARN("needs root to plant a folder a user cannot empty; skipped");
    return;
  }
  PlantingGround ground;
  const std::string mine = nobodys_folder(ground);
  const Fd dir(::open(mine.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::optional<int> planted = as_nobody([&dir] { return planted_tree(dir.get(), "tree", "/") ? 0 : 1; });
  if (!planted) {
    WARN("cannot become nobody here; skipped");
    return;
  }
  REQUIRE(*planted == 0);
  // root's folders inside nobody's tree, each with a file, at the top and deep
  // down: nobody can neither empty, move nor change them.
  const Fd tree(::openat(dir.get(), "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (const char* at : {"tree", "tree/chain/deep0001/deep0001"}) {
    const std::string folder = mine + "/" + at + "/roots";
    REQUIRE(::mkdir(folder.c_str(), 0755) == 0);
    REQUIRE(planted_file(Fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)).get(), "kept"));
  }
  const std::optional<int> code = as_nobody([&dir] { return remove_tree_at(dir.get(), "tree") ? 1 : 0; });
  REQUIRE(code);
  CHECK(*code == 0);  // it came back, and said false
  // Everything else is gone: the tree holds root's two folders, and the few
  // folders that lead to the deep one (wherever the removal left them).
  CHECK(names_anything(tree.get(), "roots/kept"));
  int files = 0, folders = 0;
  for (std::filesystem::recursive_directory_iterator it(mine + "/tree"), end; it != end; ++it) {
    INFO(std::filesystem::relative(it->path(), mine).string());
    if (it.depth() > 2) {
      FAIL_CHECK("more was left than the folders that lead to root's");
      break;
    }
    if (it->is_symlink() || !it->is_directory()) CHECK(it->path().filename() == "kept");
    (it->is_directory() ? folders : files) += 1;
  }
  CHECK(files == 2);
  CHECK(folders <= 4);
}

TEST_CASE("a staging folder goes with the folders a worker made in it", "[remove_tree]") {
  PlantingGround ground, outside;
  REQUIRE(planted_file(Fd(outside.open_folder()).get(), "precious"));
  const std::string model = ground.dir.file("m.pt");
  std::string path;
  {
    const StagingFolder stage(model, 1 << 20);
    path = stage.path();
    const Fd folder(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(planted_tree(folder.get(), "planted", outside.dir.path.string()));
    REQUIRE(planted_file(folder.get(), "m.pt"));
  }
  CHECK_FALSE(exists(path));
  CHECK(slurp(outside.dir.file("precious")) == "planted");
}

TEST_CASE("a killed run's staging folder is removed with the folders in it by the next run", "[remove_tree]") {
  PlantingGround ground;
  const Fd dir(ground.open_folder());
  // No process has this pid: pid_max is at most 2^22.
  const std::string leftover = ".m.pt.tsarchive-999999999-Ab12Cd";
  REQUIRE(planted_tree(dir.get(), leftover.c_str(), "/"));
  CHECK(remove_leftovers(ground.dir.path.string(), "m.pt") == 1);
  CHECK_FALSE(names_anything(dir.get(), leftover.c_str()));
}

TEST_CASE("an interrupted run removes its staging folder with the folders in it", "[remove_tree]") {
  PlantingGround ground;
  const std::string model = ground.dir.file("m.pt");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(null, STDERR_FILENO);  // the line "interrupted by SIGTERM" is not this test's output
    try {
      const StagingFolder stage(model, 1 << 20);
      const Fd folder(::open(stage.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!planted_tree(folder.get(), "planted", "/")) ::_exit(2);
      ::raise(SIGTERM);  // the handler removes the folder and exits 143
    } catch (...) {
    }
    ::_exit(3);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  int left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ground.dir.path)) {
    INFO(entry.path().string());
    ++left;
  }
  CHECK(left == 0);
}

TEST_CASE("a worker's temporary folder goes with a planted deep tree, also when a killed run left it",
          "[remove_tree][sandbox]") {
  PlantingGround tmp, outside;
  REQUIRE(planted_file(Fd(outside.open_folder()).get(), "precious"));
  const char* saved = std::getenv("TMPDIR");
  const std::optional<std::string> old_tmpdir = saved ? std::optional<std::string>(saved) : std::nullopt;
  REQUIRE(::setenv("TMPDIR", tmp.dir.path.c_str(), 1) == 0);
  const Fd dir(tmp.open_folder());
  // A killed run's folder: its pid is not a process's (pid_max is at most 2^22).
  REQUIRE(planted_tree(dir.get(), "tsarchive-worker-999999999-Ab12Cd", outside.dir.path.string()));
  std::string path;
  {
    const WorkerTempFolder folder;
    CHECK_FALSE(names_anything(dir.get(), "tsarchive-worker-999999999-Ab12Cd"));
    path = folder.path();
    const Fd own(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(planted_tree(own.get(), "planted", outside.dir.path.string()));
    REQUIRE(planted_chain(own.get(), "chain", kPlantedDepth));
  }
  if (old_tmpdir) {
    ::setenv("TMPDIR", old_tmpdir->c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  CHECK_FALSE(exists(path));
  CHECK(slurp(outside.dir.file("precious")) == "planted");
}
