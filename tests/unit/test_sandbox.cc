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
#include <linux/capability.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "base/posix_fd.h"
#include "contract/device.h"
#include "helpers.h"
#include "worker/sandbox.h"
#include "worker/worker.h"

using namespace tsarchive;

namespace {

// A worker job loading "model.pt", with these --load-library files and
// folders it may write.
WorkerJob loading_job(std::vector<std::string> libraries, std::vector<std::string> writable) {
  WorkerJob job;
  job.file = "model.pt";
  job.activity = "loading the module";
  job.libraries = std::move(libraries);
  job.writable = std::move(writable);
  return job;
}

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
  kSystemRead = 16,
  kEntered = 32,
  kUnixRefused = 64,
  kPrivateRefused = 128,
};

// `cuda`: as a job on a CUDA device enters it, starting the NVIDIA driver
// first where there is one (sandbox.h); the sandbox around the job's code is the same.
int in_sandbox(const std::string& inside, const std::string& outside, bool cuda = false) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int ok = 0;
    try {
      enter_sandbox(SandboxPolicy{{inside}, cuda, {}});
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
    // The system's files are read; a folder of the user's is not (sandbox.h).
    if (::open("/proc/self/status", O_RDONLY | O_CLOEXEC) >= 0 && ::open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC) >= 0) {
      ok |= kSystemRead;
    }
    const int read = ::open((outside + "/existing").c_str(), O_RDONLY | O_CLOEXEC);
    if (read < 0 && errno == EACCES) ok |= kPrivateRefused;
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
  CHECK((ok & kSystemRead) != 0);
  CHECK((ok & kPrivateRefused) != 0);
}

TEST_CASE("the sandbox: a worker reads the files its job names, its libraries' folders, no other of the user's",
          "[sandbox][worker]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || s.landlock_abi == 0) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  TempDir home, libraries;
  const auto make = [](const std::string& path) {
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "x", 1) == 1);
    ::close(fd);
  };
  make(home.file("id_ed25519"));
  make(home.file("model.pt"));
  make(libraries.file("libcustom_ops.so"));
  make(libraries.file("libneighbour.so"));
  const int archive = ::open(home.file("model.pt").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(archive >= 0);
  WorkerJob job = loading_job({libraries.file("libcustom_ops.so")}, {});
  struct stat st {};
  REQUIRE(::fstat(archive, &st) == 0);
  job.archive = WatchedFile{archive, FileState::of(st)};
  const std::string seen = run_in_worker(job, [&] {
    const auto readable = [](const std::string& path) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      return fd >= 0 ? "read" : errno == EACCES ? "refused" : "failed";
    };
    std::string out = std::string("archive ") + readable("/proc/self/fd/" + std::to_string(archive));
    out += std::string(", library ") + readable(libraries.file("libcustom_ops.so"));
    out += std::string(", its neighbour ") + readable(libraries.file("libneighbour.so"));
    out += std::string(", key ") + readable(home.file("id_ed25519"));
    out += std::string(", archive by name ") + readable(home.file("model.pt"));
    out += std::string(", /etc/shadow ") + (::access("/etc/shadow", F_OK) != 0 ? "refused" : readable("/etc/shadow"));
    out += std::string(", /etc/passwd ") + readable("/etc/passwd");
    return out;
  });
  ::close(archive);
  // The archive by name is the same file as by its descriptor: one rule, on the file.
  CHECK(seen == "archive read, library read, its neighbour read, key refused, archive by name read, "
                "/etc/shadow refused, /etc/passwd read");
}

TEST_CASE("the sandbox: libtorch's mkdtemp(\"/tmp/XXXXXX\") gets the folder the parent reserved, once", "[sandbox]") {
  ReservedLibtorchFolder reserved;
  REQUIRE(reserved.path().size() == std::strlen("/tmp/XXXXXX"));
  CHECK(is_directory(reserved.path()));
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    reserve_libtorch_tmp_folder(reserved.path());
    char first[] = "/tmp/XXXXXX", second[] = "/tmp/XXXXXX", other[] = "/tmp/tsarchive-test-XXXXXX";
    const bool first_reserved = ::mkdtemp(first) != nullptr && reserved.path() == first;
    const bool second_made = ::mkdtemp(second) != nullptr && reserved.path() != second && ::rmdir(second) == 0;
    const bool other_made = ::mkdtemp(other) != nullptr && ::rmdir(other) == 0;
    ::_exit(first_reserved && second_made && other_made ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  const std::string path = reserved.path();
  { ReservedLibtorchFolder gone; CHECK(gone.path() != path); }
}

TEST_CASE("the sandbox: a worker's environment keeps what libraries read, not a CI job's secrets", "[sandbox][worker]") {
  CHECK(worker_keeps_variable("OMP_NUM_THREADS"));
  CHECK(worker_keeps_variable("CUDA_VISIBLE_DEVICES"));
  CHECK(worker_keeps_variable("LC_ALL"));
  CHECK(worker_keeps_variable("TMPDIR"));
  CHECK(worker_keeps_variable("TSARCHIVE_WORKER_NOTES_FD"));
  CHECK_FALSE(worker_keeps_variable("AWS_SECRET_ACCESS_KEY"));
  CHECK_FALSE(worker_keeps_variable("GITHUB_TOKEN"));
  CHECK_FALSE(worker_keeps_variable("NVIDIA_API_KEY"));  // a kept prefix, a secret's name
  CHECK_FALSE(worker_keeps_variable("TORCH_HUB_TOKEN"));
  CHECK_FALSE(worker_keeps_variable("HF_TOKEN"));
  CHECK_FALSE(worker_keeps_variable("DATABASE_URL"));
  const SandboxSupport& s = sandbox_support();
  if (s.disabled) {
    WARN("sandbox off (TSARCHIVE_NO_SANDBOX=1); the scrub is skipped");
    return;
  }
  ::setenv("TSARCHIVE_TEST_SECRET_TOKEN", "hunter2-in-the-environment", 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
  WorkerJob job = loading_job({}, {});
  const std::string seen = run_in_worker(job, [] {
    std::ifstream environ_file("/proc/self/environ");
    const std::string block((std::istreambuf_iterator<char>(environ_file)), std::istreambuf_iterator<char>());
    const char* secret = std::getenv("TSARCHIVE_TEST_SECRET_TOKEN");
    const char* omp = std::getenv("OMP_NUM_THREADS");
    return std::string(secret == nullptr ? "secret unset" : "secret set") + (omp != nullptr ? ", omp kept" : ", omp gone") +
           (block.find("hunter2") == std::string::npos ? ", not in environ" : ", in environ");
  });
  ::unsetenv("TSARCHIVE_TEST_SECRET_TOKEN");
  CHECK(seen == "secret unset, omp kept, not in environ");
}

TEST_CASE("the sandbox: a worker holds none of the parent's descriptors, and cannot type into a terminal",
          "[sandbox][worker]") {
  TempDir outside;
  const int written = ::open(outside.file("log.txt").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  REQUIRE(written >= 0);
  const int leaked = ::fcntl(written, F_DUPFD, 40);  // not close-on-exec, as a parent's shell may leave one
  REQUIRE(leaked >= 0);
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(master >= 0);
  REQUIRE(::grantpt(master) == 0);
  REQUIRE(::unlockpt(master) == 0);
  const std::string pts = ::ptsname(master);
  const int terminal = ::open(pts.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  REQUIRE(terminal >= 0);
  WorkerJob job = loading_job({}, {});
  const std::string seen = run_in_worker(job, [&] {
    std::string out = ::fcntl(written, F_GETFD) < 0 && ::fcntl(leaked, F_GETFD) < 0 ? "closed" : "open";
    out += ::isatty(STDIN_FILENO) == 0 && ::isatty(STDOUT_FILENO) == 0 && ::isatty(STDERR_FILENO) == 0 ? ", no tty" : ", a tty";
    // A copy of a terminal that survived by another way: TIOCSTI is refused all the same.
    const int tty = ::open(pts.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    const char c = 'x';
    if (tty < 0) return out + ", tty not opened";
    const int rc = ::ioctl(tty, TIOCSTI, &c);
    out += rc < 0 && errno == EPERM ? ", TIOCSTI refused" : rc == 0 ? ", TIOCSTI typed" : ", TIOCSTI failed otherwise";
    return out;
  });
  ::close(leaked);
  ::close(written);
  // Nothing was typed: the terminal has no input to read.
  ::fcntl(terminal, F_SETFL, O_NONBLOCK);
  char typed = 0;
  CHECK(::read(terminal, &typed, 1) < 0);
  ::close(terminal);
  ::close(master);
  if (sandbox_support().disabled || !sandbox_support().seccomp) {
    CHECK_THAT(seen, Catch::StartsWith("closed, no tty"));
  } else {
    CHECK_THAT(seen, Catch::StartsWith("closed, no tty, "));
    CHECK_THAT(seen, Catch::EndsWith("TIOCSTI refused") || Catch::EndsWith("tty not opened"));
  }
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
  WorkerJob job = loading_job({}, {staging.path.string()});
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
  WorkerJob job = loading_job({}, {staging.path.string()});
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

TEST_CASE("a worker reaches no other process by its pid, keeps no capability but reading, reads no terminal or /dev/shm",
          "[sandbox][worker]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || !s.seccomp || s.landlock_abi == 0) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  const std::string shm = "/dev/shm/tsarchive-test-" + std::to_string(::getpid());
  ::close(::open(shm.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  WorkerJob job = loading_job({}, {});
  const std::string seen = run_in_worker(job, [&] {
    const auto refused = [](int rc) { return rc < 0 && (errno == EPERM || errno == EACCES) ? "refused" : "allowed"; };
    const pid_t parent = ::getppid();
    const rlimit none{0, 0};
    std::string out = std::string("prlimit(parent) ") + refused(::prlimit(parent, RLIMIT_CPU, &none, nullptr));
    rlimit mine{};
    out += std::string(", getrlimit ") + (::getrlimit(RLIMIT_NOFILE, &mine) == 0 ? "allowed" : "refused");
    out += std::string(", kill(parent) ") + refused(::kill(parent, 0));
    out += std::string(", kill(group) ") + refused(::kill(0, 0));
    out += std::string(", kill(self) ") + (::kill(::getpid(), 0) == 0 ? "allowed" : "refused");
    out += std::string(", setpriority ") + refused(::setpriority(PRIO_USER, 0, 19));
    out += std::string(", setsid ") + refused(::setsid());
    out += std::string(", pdeathsig ") + refused(::prctl(PR_SET_PDEATHSIG, 0));
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    out += std::string(", F_SETOWN ") + refused(::fcntl(pipe_fds[0], F_SETOWN, parent));
    const std::string scratch = std::string(std::getenv("TMPDIR")) + "/scratch";
    ::close(::open(scratch.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    out += std::string(", O_RDONLY|O_TRUNC ") + refused(::open(scratch.c_str(), O_RDONLY | O_TRUNC | O_CLOEXEC));
    out += std::string(", truncate ") + refused(::truncate(scratch.c_str(), 0));
    out += std::string(", /dev/shm ") + refused(::open(shm.c_str(), O_RDONLY | O_CLOEXEC));
    out += std::string(", /proc/1/cmdline ") + refused(::open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC));
    out += std::string(", /proc/self/status ") + (::open("/proc/self/status", O_RDONLY | O_CLOEXEC) >= 0 ? "read" : "refused");
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    ::syscall(SYS_capget, &header, data);
    const bool reading_only = (data[0].effective & ~CAP_TO_MASK(CAP_DAC_READ_SEARCH)) == 0 && data[1].effective == 0;
    out += std::string(", capabilities ") + (reading_only ? "reading only" : "more");
    return out;
  });
  ::unlink(shm.c_str());
  CHECK(seen == "prlimit(parent) refused, getrlimit allowed, kill(parent) refused, kill(group) refused, kill(self) allowed, "
                "setpriority refused, setsid refused, pdeathsig refused, F_SETOWN refused, O_RDONLY|O_TRUNC refused, "
                "truncate refused, /dev/shm refused, /proc/1/cmdline refused, "
                "/proc/self/status read, capabilities reading only");
}

TEST_CASE("a worker holds no socket pair, inotify or file attribute flag, and reaches no other process's pages",
          "[sandbox][worker]") {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled || !s.seccomp) {
    WARN("sandbox on this kernel: " << describe_sandbox(s) << "; skipped");
    return;
  }
  WorkerJob job = loading_job({}, {});
  const std::string seen = run_in_worker(job, [&] {
    const auto refused = [](long rc) { return rc < 0 && errno == EPERM ? "refused" : "allowed"; };
    const pid_t parent = ::getppid();
    int pair[2];
    std::string out = std::string("socketpair ") + refused(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
    out += std::string(", inotify ") + refused(::syscall(SYS_inotify_init1, 0));
    const std::string scratch = std::string(std::getenv("TMPDIR")) + "/flags";
    const int fd = ::open(scratch.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    long flags = 0;
    out += std::string(", FS_IOC_SETFLAGS ") + refused(::ioctl(fd, FS_IOC_SETFLAGS, &flags));
    out += std::string(", getpgid(parent) ") + refused(::getpgid(parent));
    out += std::string(", getpgid(self) ") + (::getpgid(0) > 0 ? "allowed" : "refused");
    out += std::string(", getsid(parent) ") + refused(::getsid(parent));
    unsigned long mask = 1;
    out += std::string(", migrate_pages(parent) ") + refused(::syscall(SYS_migrate_pages, parent, 8, &mask, &mask));
    return out;
  });
  CHECK(seen == "socketpair refused, inotify refused, FS_IOC_SETFLAGS refused, getpgid(parent) refused, "
                "getpgid(self) allowed, getsid(parent) refused, migrate_pages(parent) refused");
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
  WorkerJob job = loading_job({}, {staging.path.string()});
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
