// The worker's sandbox (worker/sandbox.h) on this kernel: a forked child
// enters it and tries what a hostile model's code would. Where the kernel
// lacks Landlock or seccomp filters the parts that need them are skipped
// with a warning (the CLI's note covers those machines).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>

#include "contract/device.h"
#include "helpers.h"
#include "worker/sandbox.h"
#include "worker/worker.h"

using namespace tsarchive;

namespace {

// Whether `path` names anything, a symbolic link itself included (base/posix_fd.h's
// exists follows links).
bool lexists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Bits of the child's exit status: what went as the sandbox wants.
enum : int {
  kOutsideRefused = 1,
  kInsideWritten = 2,
  kExecRefused = 4,
  kTcpRefused = 8,
  kReadAllowed = 16,
  kEntered = 32,
  kUnixRefused = 64,
};

// `cuda`: as a job on a CUDA device enters it, starting the NVIDIA driver
// first where there is one (sandbox.h); the sandbox around the job's code is the same.
int in_sandbox(const std::string& inside, const std::string& outside, bool cuda = false) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int ok = 0;
    try {
      enter_sandbox(SandboxPolicy{{inside}, cuda});
      ok |= kEntered;
    } catch (...) {
      ::_exit(0);
    }
    // Create (and, existing, overwrite) outside the allowed folder, as
    // torch.from_file(path, shared=True) does.
    const int out = ::open((outside + "/written").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (out < 0 && (errno == EACCES || errno == EPERM)) ok |= kOutsideRefused;
    const int existing = ::open((outside + "/existing").c_str(), O_RDWR | O_CLOEXEC);
    if (existing >= 0 || (errno != EACCES && errno != EPERM)) ok &= ~kOutsideRefused;
    const int in = ::open((inside + "/written").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (in >= 0 && ::write(in, "ok", 2) == 2 && ::mkdir((inside + "/sub").c_str(), 0700) == 0) ok |= kInsideWritten;
    const char* argv[] = {"true", nullptr};
    ::execv("/bin/true", const_cast<char* const*>(argv));
    if (errno == EACCES || errno == EPERM) ok |= kExecRefused;
    const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
    if (tcp < 0 && (errno == EACCES || errno == EPERM)) ok |= kTcpRefused;
    // The socket the NVIDIA driver asks for in cuInit, refused after it (sandbox.h).
    const int unix_socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (unix_socket < 0 && errno == EPERM) ok |= kUnixRefused;
    const int read = ::open((outside + "/existing").c_str(), O_RDONLY | O_CLOEXEC);
    if (read >= 0) ok |= kReadAllowed;
    ::_exit(ok);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("the sandbox: writes only in the allowed folder, no exec, no sockets", "[sandbox]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || s.landlock_abi == 0 || !s.seccomp) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  const bool cuda = GENERATE(false, true);
  INFO("a job on a CUDA device: " << cuda);
  TempDir inside, outside;
  { const int fd = ::open(outside.file("existing").c_str(), O_CREAT | O_WRONLY, 0600); ::close(fd); }
  const int ok = in_sandbox(inside.path.string(), outside.path.string(), cuda);
  CHECK((ok & kEntered) != 0);
  CHECK((ok & kOutsideRefused) != 0);
  CHECK_FALSE(lexists(outside.file("written")));
  CHECK((ok & kInsideWritten) != 0);
  CHECK(lexists(inside.file("written")));
  CHECK((ok & kExecRefused) != 0);
  CHECK((ok & kTcpRefused) != 0);
  CHECK((ok & kUnixRefused) != 0);
  CHECK((ok & kReadAllowed) != 0);
}

TEST_CASE("the sandbox: which --device values start CUDA before it", "[sandbox]") {
  CHECK(is_cuda_device("cuda"));
  CHECK(is_cuda_device("cuda:1"));
  CHECK_FALSE(is_cuda_device("cpu"));
  CHECK_FALSE(is_cuda_device(""));
}

TEST_CASE("the sandbox: described for --version --verbose, a note only when it is partial", "[sandbox]") {
  SandboxSupport full{false, 7, true};
  CHECK(describe_sandbox(full) == "landlock ABI 7 + seccomp");
  CHECK(sandbox_note(full).empty());
  CHECK(describe_sandbox(SandboxSupport{true, 7, true}) == "off (TSARCHIVE_NO_SANDBOX=1)");
  CHECK(sandbox_note(SandboxSupport{true, 0, false}).empty());  // off on request: no note
  CHECK_THAT(sandbox_note(SandboxSupport{false, 0, true}), Catch::Contains("no Landlock"));
  CHECK_THAT(sandbox_note(SandboxSupport{false, 3, false}), Catch::Contains("no seccomp"));
  CHECK_THAT(describe_sandbox(SandboxSupport{false, 0, false}), Catch::StartsWith("none"));
}

TEST_CASE("a worker writes in its own TMPDIR, which goes with it, and nowhere else", "[sandbox][worker]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || s.landlock_abi == 0) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  TempDir outside, staging;
  WorkerJob job{"model.pt", "loading the module", {}, true, {}, {staging.path.string()}};
  // TMPDIR is the worker's own folder, writable; the job's folder too; others not.
  const std::string tmpdir = run_in_worker(job, [&] {
    const std::string tmp = std::getenv("TMPDIR");
    const bool in_tmp = ::close(::open((tmp + "/scratch").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0;
    const bool in_staging = ::close(::open(staging.file("saved.pt").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0;
    const bool outside_refused = ::open(outside.file("x").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600) < 0;
    return tmp + (in_tmp && in_staging && outside_refused ? " ok" : " failed");
  });
  REQUIRE(tmpdir.size() > 3);
  CHECK(tmpdir.substr(tmpdir.size() - 3) == " ok");
  CHECK_THAT(tmpdir, Catch::Contains("/tsarchive-worker-"));
  CHECK_FALSE(lexists(tmpdir.substr(0, tmpdir.size() - 3)));  // removed when the worker ended
  CHECK(lexists(staging.file("saved.pt")));
  CHECK_FALSE(lexists(outside.file("x")));
}

TEST_CASE("a worker starts threads but no process, and sets no extended attribute", "[sandbox][worker]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || !s.seccomp) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  TempDir staging;
  WorkerJob job{"model.pt", "loading the module", {}, true, {}, {staging.path.string()}};
  const std::string seen = run_in_worker(job, [&] {
    std::string out;
    const pid_t child = ::fork();  // glibc's fork: clone(SIGCHLD), no CLONE_THREAD
    if (child == 0) ::_exit(0);
    out += child < 0 && errno == EPERM ? "fork refused" : "fork allowed";
    const long vfork = ::syscall(SYS_clone, CLONE_VM | CLONE_VFORK | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (vfork == 0) ::_exit(0);
    out += vfork < 0 && errno == EPERM ? ", spawn refused" : ", spawn allowed";
    int answer = 0;
    std::thread([&] { answer = 42; }).join();
    out += answer == 42 ? ", thread ran" : ", no thread";
    const std::string file = staging.file("saved.pt");
    ::close(::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    const bool xattr = ::setxattr(file.c_str(), "user.tsarchive", "x", 1, 0) == 0;
    out += xattr ? ", xattr set" : (errno == EPERM ? ", xattr refused" : ", xattr failed otherwise");
    return out;
  });
  CHECK_THAT(seen, Catch::StartsWith("fork refused, spawn refused, thread ran, xattr "));
  CHECK_THAT(seen, !Catch::EndsWith("xattr set"));
}

TEST_CASE("a worker changes no file's mode, owner or times, even one it may read", "[sandbox][worker]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || !s.seccomp) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  TempDir outside, staging;
  const std::string victim = outside.file("secret.txt");
  ::close(::open(victim.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  struct stat before {};
  REQUIRE(::stat(victim.c_str(), &before) == 0);
  WorkerJob job{"model.pt", "loading the module", {}, true, {}, {staging.path.string()}};
  const std::string seen = run_in_worker(job, [&] {
    const auto refused = [](int rc) { return rc < 0 && errno == EPERM ? "refused" : "allowed"; };
    const timespec epoch[2] = {{0, 0}, {0, 0}};
    std::string out = std::string("chmod ") + refused(::chmod(victim.c_str(), 0666));
    out += std::string(", chown ") + refused(::chown(victim.c_str(), ::getuid(), ::getgid()));
    out += std::string(", utimensat ") + refused(::utimensat(AT_FDCWD, victim.c_str(), epoch, 0));
    const int fd = ::open(victim.c_str(), O_RDONLY | O_CLOEXEC);
    out += std::string(", fchmod ") + refused(::fchmod(fd, 0666));
    ::close(fd);
    return out;
  });
  CHECK(seen == "chmod refused, chown refused, utimensat refused, fchmod refused");
  struct stat after {};
  REQUIRE(::stat(victim.c_str(), &after) == 0);
  CHECK(after.st_mode == before.st_mode);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
}
