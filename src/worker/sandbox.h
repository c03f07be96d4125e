// The libtorch worker's sandbox: what a model's own code may do while
// libtorch loads and runs it.
//
// A TorchScript archive is a program: __setstate__ runs on load, forward on
// run, and TorchScript has operators that reach the file system
// (aten::from_file with shared=True maps any file the user may write, and
// creates it, and the model writes into it). The core's checks read records;
// they cannot see what the code will do. So every worker (worker.h, and
// serve's model_worker.h) confines itself for good before it loads libtorch:
//   - Landlock: files are read only in the system's folders (/usr, /lib*,
//     /bin, /sbin, /opt, /sys, /nix/store, /gnu/store), of /proc the
//     worker's own entries and the machine's, of /etc what the C library and
//     the loader read, of /dev the devices it uses, the folders of the
//     libraries the worker has loaded (the torch layer and libtorch, loaded
//     before the sandbox; a site-packages folder whole, for CUDA's libraries
//     beside torch's; the file alone where its folder holds the user's own
//     files), the files the job names (the archive, --load-library) and the
//     folders it may write: not the user's home, /tmp, /var, /run, /mnt or
//     any other folder of theirs, so native code from the file (an
//     AOTInductor package's library) cannot read keys or tokens and return
//     them as a model's output. Files are written, created, truncated or
//     removed only inside the job's own temporary folder (TMPDIR points
//     there: AOTInductor unpacks a .pt2's libraries into it, Kineto its
//     trace) and the folders the job names (stamp's, trace's and convert's
//     staging folder); /dev/null, /dev/zero, /dev/full, /dev/urandom and the
//     NVIDIA device files may be opened for writing. Nothing may be executed.
//     From Landlock ABI 4 no TCP bind or connect; from ABI 6 no signals and
//     no abstract UNIX sockets outside the worker.
//   - the environment: only the variables libtorch, its libraries, CUDA
//     and the worker read are kept (OMP_*, CUDA_*, TORCH_*, LC_*, ...; none
//     whose name says KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL), and the
//     bytes of the rest are zeroed where /proc/self/environ reads them: a CI
//     job's AWS_SECRET_ACCESS_KEY or GITHUB_TOKEN is not the model's to read.
//   - seccomp: execve and execveat, socket() and socketpair() of every
//     family, ptrace and process_vm_*, new namespaces (unshare, setns,
//     clone's CLONE_NEW*), mount and the new mount API, bpf,
//     perf_event_open, userfaultfd, io_uring (its operations do not pass
//     through seccomp), inotify and fanotify (the worker is not to learn
//     when the user touches a file), ioctl's TIOCSTI and TIOCLINUX (they
//     type into a terminal) and FS_IOC_SETFLAGS/FS_IOC_FSSETXATTR (an
//     immutable staging file would outlive tsarchive's removal), keyrings,
//     modules, kexec and reboot, setting extended attributes (an ACL would
//     travel with a file the worker wrote), and new processes (fork, vfork,
//     clone without CLONE_THREAD: a process would outlive the worker) fail
//     with EPERM; clone3 with ENOSYS, so glibc falls back to clone, whose
//     flags a filter can read. Calls that reach another process by its pid
//     (kill, tgkill, sigqueue, prlimit, the scheduler's setters but
//     sched_setaffinity, which OpenMP calls with thread ids, migrate_pages,
//     move_pages, get_robust_list, getpgid, getsid) reach only the worker
//     itself; fcntl's F_SETOWN/F_SETSIG (a signal to any pid on
//     I/O) and F_SETLEASE, setpriority, pidfd_*, setsid, setpgid,
//     PR_SET_PDEATHSIG, vhangup, clock_adjtime, System V IPC and message
//     queues, truncate(path) and read-only opens with O_TRUNC (Landlock sees
//     truncation only from ABI 3) are refused; a root worker drops its
//     capabilities but CAP_DAC_READ_SEARCH. Every worker
//     speaks over pipes; an AF_UNIX socket would reach daemons by path
//     (Landlock does not see connect()), so no family is allowed (glibc's
//     nscd client falls back to the files).
// Both bind the calling thread and every thread and child it starts later,
// so a worker enters the sandbox while it has one thread: in the child right
// after fork, or right after exec, having loaded the torch layer (libtorch's
// initializers start no thread and read nothing of the archive; the worker
// checks the first: prepare_sandbox fails on a thread it did not expect). Where the kernel lacks one (Landlock:
// Linux 5.13 and the LSM enabled; seccomp filters: 3.5) the worker runs with
// what there is and the CLI prints one note. TSARCHIVE_NO_SANDBOX=1 turns it
// off; TSARCHIVE_IN_PROCESS=1 has no worker to confine.
//
// CUDA is the exception. The NVIDIA driver's cuInit fails with error 304
// ("OS call failed") inside the sandbox, and with either layer alone (strace
// on an H100, driver 580): Landlock refuses its threads' writes of their
// names to /proc/PID/task/TID/comm (opened with O_TRUNC), and the filter
// refuses its socket(AF_UNIX, SOCK_SEQPACKET). Allowing both for the worker's
// whole life would hand a model's code a socket to any local daemon. So a
// worker whose job uses a CUDA device (SandboxPolicy::cuda) starts the driver
// first, loading libcuda and calling cuInit before it confines itself;
// libtorch has not read the archive by then. What that leaves: the threads
// cuInit started are under the seccomp filter (it is installed on every
// thread) but not under Landlock, which binds only the thread that enters it
// and those it starts later. The model's code runs on the worker's main
// thread and the threads it starts, under both.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"

namespace tsarchive {

// What this kernel offers, probed once without restricting anything.
struct SandboxSupport {
  bool disabled = false;  // TSARCHIVE_NO_SANDBOX=1
  int landlock_abi = 0;   // 0: no Landlock
  bool seccomp = false;   // seccomp filters (and an architecture the filter knows)
};
const SandboxSupport& sandbox_support();

// For --version --verbose: "landlock ABI 7 + seccomp", "seccomp only (no
// Landlock in this kernel)", "off (TSARCHIVE_NO_SANDBOX=1)", ...
std::string describe_sandbox(const SandboxSupport& support);
// The one note the CLI prints when the kernel offers less than both; "" when
// it offers both or the sandbox is off on request.
std::string sandbox_note(const SandboxSupport& support);

struct SandboxPolicy {
  std::vector<std::string> writable;  // folders (and what is below them) the worker may write
  bool cuda = false;                  // the job uses a CUDA device: start the driver first (above)
  // Files (and folders) the worker reads beyond the system's and its
  // libraries' folders: the archive by /proc/self/fd/N, --load-library files.
  std::vector<std::string> readable;
};

// A worker job's policy: it writes in `writable`, reads the archive (its
// /proc/self/fd/N path; empty: none) and each --load-library library with the
// folder it lies in (a library may load its neighbours).
SandboxPolicy job_policy(std::vector<std::string> writable, bool cuda, const std::string& archive,
                         const std::vector<std::string>& libraries);

// Before enter_sandbox, while the process has one thread: the torch layer
// (`load`, which loads it) and the driver for a CUDA job, so that the sandbox
// can let the worker read the folders of the libraries they loaded. Throws
// Error(Torch) when `load` started a thread (the sandbox would not bind it).
void prepare_sandbox(const SandboxPolicy& policy, const std::function<void()>& load);

// Zeroes and unsets every environment variable the worker does not need
// (above); keeps TMPDIR, LC_*, OMP_*, CUDA_*, TORCH_*, TSARCHIVE_*, ... Call it
// in the worker before it loads anything of the archive.
void scrub_environment();
// Whether scrub_environment keeps the variable `name`.
bool worker_keeps_variable(const std::string& name);

// Confines the calling process for good (see above), with what
// sandbox_support() found. Call it while the process has one thread (with
// policy.cuda, it has the driver's threads after). Throws
// Error(Torch) when a step the kernel offers fails: a worker never goes on
// unconfined by surprise.
void enter_sandbox(const SandboxPolicy& policy);

// `e` as the sandboxed worker reports it: when libtorch's text says
// "Permission denied" or "Operation not permitted" (Landlock answers EACCES,
// the filter EPERM), the hint says that the model's code tried what the
// sandbox refuses. Other errors are returned as they are.
Error explain_sandbox_refusal(const Error& e);

// libtorch 2.x's AOTIModelPackageLoader unpacks a package into
// mkdtemp("/tmp/XXXXXX") whatever TMPDIR says (its create_temp_dir, which
// then uses its own buffer, so the name cannot be longer). Granting the worker
// /tmp would let the package's library, native code from the file, read and
// write every file of the user's there. Instead the parent reserves one such
// folder (ReservedLibtorchFolder), the worker's sandbox grants that folder
// alone, and the worker arms reserve_libtorch_tmp_folder(name): the first
// mkdtemp("/tmp/XXXXXX") in the process is answered with it. tsarchive's
// binary exports its own mkdtemp (CMakeLists.txt: --export-dynamic-symbol),
// which libtorch's call binds to; any other template goes to the C library.
void reserve_libtorch_tmp_folder(const std::string& name);

// "/tmp/XXXXXX" made by the parent for one worker, removed with what is in it.
class ReservedLibtorchFolder {
 public:
  ReservedLibtorchFolder();  // Error(Io) when it cannot be made
  ~ReservedLibtorchFolder();
  ReservedLibtorchFolder(const ReservedLibtorchFolder&) = delete;
  ReservedLibtorchFolder& operator=(const ReservedLibtorchFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A worker's own temporary folder, "$TMPDIR/tsarchive-worker-PID-XXXXXX"
// (TMPDIR unset: /tmp), mode 0700; removed with its contents when this goes.
// Made by the parent, so it outlives the worker and is cleaned up whatever the
// worker did; folders of dead processes (an interrupted tsarchive) are
// removed by the next one (the folder's flock tells who is alive). Throws Error(Io) when it cannot be made.
class WorkerTempFolder {
 public:
  WorkerTempFolder();
  ~WorkerTempFolder();
  WorkerTempFolder(const WorkerTempFolder&) = delete;
  WorkerTempFolder& operator=(const WorkerTempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;  // holds the folder's flock while it is in use
};

}  // namespace tsarchive
