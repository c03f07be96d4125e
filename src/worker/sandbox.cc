// The worker's sandbox: Landlock and a seccomp filter; see sandbox.h for why.
#include "worker/sandbox.h"

#include <dirent.h>
#include <limits.h>
#include <link.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/temp_files_and_locks.h"

namespace tsarchive {
namespace {

// Landlock's ABI, spelled out here: the system's <linux/landlock.h> may be
// older than the kernel (Debian 12's knows ABI 2), and rights a kernel does
// not know are masked off by ABI below, so one binary runs on every kernel.
constexpr int kCreateRulesetVersion = 1 << 0;
constexpr int kRulePathBeneath = 1;
constexpr uint64_t kFsExecute = 1ULL << 0;
constexpr uint64_t kFsWriteFile = 1ULL << 1;
constexpr uint64_t kFsReadFile = 1ULL << 2;
constexpr uint64_t kFsReadDir = 1ULL << 3;
constexpr uint64_t kFsRemoveDir = 1ULL << 4;
constexpr uint64_t kFsRemoveFile = 1ULL << 5;
constexpr uint64_t kFsMakeDir = 1ULL << 7;
constexpr uint64_t kFsMakeReg = 1ULL << 8;
constexpr uint64_t kFsMakeSym = 1ULL << 12;
constexpr uint64_t kFsAbi1 = (1ULL << 13) - 1;  // EXECUTE .. MAKE_SYM
constexpr uint64_t kFsRefer = 1ULL << 13;       // ABI 2
constexpr uint64_t kFsTruncate = 1ULL << 14;    // ABI 3
constexpr uint64_t kFsIoctlDev = 1ULL << 15;    // ABI 5
constexpr uint64_t kNetBindTcp = 1ULL << 0;     // ABI 4
constexpr uint64_t kNetConnectTcp = 1ULL << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;

struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;  // ABI 4
  uint64_t scoped = 0;              // ABI 6
};
struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kAuditArch = 0;  // no filter: the syscall numbers below are these two's
#endif

int landlock_abi() {
  const long abi = ::syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

bool seccomp_filters() {
  if (kAuditArch == 0) return false;
  uint32_t action = SECCOMP_RET_ERRNO;
  return ::syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

[[noreturn]] void fail(const std::string& step, int err) {
  throw Error(ErrorKind::Torch, "cannot sandbox the libtorch worker: " + step + ": " + std::strerror(err), {},
              "set TSARCHIVE_NO_SANDBOX=1 to run it without the sandbox, only for archives you trust");
}

uint64_t handled_fs(int abi) {
  uint64_t fs = kFsAbi1;
  if (abi >= 2) fs |= kFsRefer;
  if (abi >= 3) fs |= kFsTruncate;
  if (abi >= 5) fs |= kFsIoctlDev;
  return fs;
}

// One rule: `rights` (masked to what the ruleset handles) beneath `path`.
// False when the path does not exist.
bool allow(int ruleset, const std::string& path, uint64_t rights, uint64_t handled) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return false;
  PathBeneathAttr rule{rights & handled, fd};
  const long added = ::syscall(__NR_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0);
  const int err = errno;
  ::close(fd);
  if (added != 0) fail("landlock_add_rule " + path, err);
  return true;
}

// The device files a worker writes to: the usual sinks and sources, and
// the NVIDIA driver's (CUDA opens them read-write and sends them ioctls).
std::vector<std::string> writable_devices() {
  std::vector<std::string> devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
  if (DIR* dev = ::opendir("/dev")) {
    while (const dirent* entry = ::readdir(dev)) {
      if (std::strncmp(entry->d_name, "nvidia", 6) == 0) devices.push_back(std::string("/dev/") + entry->d_name);
    }
    ::closedir(dev);
  }
  return devices;
}

// Folders every worker reads: the system's programs and libraries, and /sys.
// The user's own (home, /tmp, /var, /run, /mnt, /srv, ...) are not among
// them; /dev is not either (the user's terminals, /dev/shm): the devices a
// worker uses are granted one by one (writable_devices), /proc and /etc
// likewise (below).
constexpr const char* kSystemFolders[] = {"/usr", "/lib",  "/lib32", "/lib64",     "/libx32",
                                          "/bin", "/sbin", "/opt",   "/nix/store", "/gnu/store", "/sys"};
// Of /proc: the worker's own entries and what libtorch, OpenMP, BLAS and the
// C library read about the machine; not other processes' command lines.
constexpr const char* kProcEntries[] = {"/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                                        "/proc/sys",  "/proc/driver",  "/proc/filesystems", "/proc/version"};
// Of /etc: what the C library and the loader read (no secrets: not shadow,
// ssh, ssl, sudoers, nor a service's configuration).
constexpr const char* kEtcEntries[] = {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",   "timezone",
                                       "nsswitch.conf", "passwd",   "group",        "host.conf",   "hosts",
                                       "resolv.conf",   "gai.conf", "locale.alias", "locale.conf", "os-release",
                                       "alternatives"};

// Read rights on `path`: a folder's for a folder, a file's for anything else
// (Landlock refuses folder rights on a file). False when it does not exist.
bool allow_reading(int ruleset, const std::string& path, uint64_t handled) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return allow(ruleset, path, S_ISDIR(st.st_mode) ? kFsReadFile | kFsReadDir : kFsReadFile, handled);
}

// Whether reading all of `folder` would hand the worker the user's own files:
// /tmp, their home, the working directory or a folder above either, and below
// their home any folder but a library folder (lib, lib64, a venv's
// site-packages: libtorch loads CUDA's libraries lazily from there). A library in such
// a folder is granted as a file instead (a binary in ~/Downloads,
// --load-library ~/ops.so, a build tree in ~/project/build).
bool holds_users_files(const std::string& folder) {
  const auto below = [](const std::string& path, const std::string& top) {
    return !top.empty() && (path == top || path.rfind(top + "/", 0) == 0);
  };
  char cwd_buffer[PATH_MAX];
  const std::string home = std::getenv("HOME") != nullptr ? std::getenv("HOME") : "";
  const std::string cwd = ::getcwd(cwd_buffer, sizeof cwd_buffer) != nullptr ? cwd_buffer : "";
  if (folder == "/tmp" || folder == "/var/tmp" || below(home, folder) || below(cwd, folder)) return true;
  const std::string name = folder.substr(folder.rfind('/') + 1);
  const bool library_folder =
      name == "lib" || name == "lib64" || name == "lib32" || name == "site-packages" || name == "dist-packages";
  return below(folder, home) && home != "/" && !library_folder;
}

// What a library at `path` may read beside itself: its folder, where its own
// later dlopen()s look; a site-packages folder counts whole (torch's CUDA
// libraries load NVIDIA's from beside it, nvidia/*/lib); the file alone where
// the folder holds the user's files.
std::string library_reads(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash == std::string::npos || slash == 0) return path;
  for (const char* packages : {"/site-packages/", "/dist-packages/"}) {
    if (const size_t at = path.find(packages); at != std::string::npos) {
      const std::string folder = path.substr(0, at + std::strlen(packages) - 1);
      return holds_users_files(folder) ? path : folder;
    }
  }
  const std::string folder = path.substr(0, slash);
  return holds_users_files(folder) ? path : folder;
}

// library_reads of every library this process has loaded, the program too.
std::set<std::string> loaded_library_reads() {
  std::set<std::string> reads;
  const auto add = [&reads](const std::string& path) { reads.insert(library_reads(path)); };
  char exe[PATH_MAX];
  if (const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0) add(std::string(exe, size_t(n)));
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] == '/') {
          char resolved[PATH_MAX];
          if (::realpath(info->dlpi_name, resolved) != nullptr) (*static_cast<decltype(add)*>(data))(resolved);
          (*static_cast<decltype(add)*>(data))(info->dlpi_name);
        }
        return 0;
      },
      const_cast<void*>(static_cast<const void*>(&add)));
  return reads;
}

void allow_system_reads(int ruleset, uint64_t handled) {
  for (const char* folder : kSystemFolders) allow_reading(ruleset, folder, handled);
  for (const char* entry : kProcEntries) allow_reading(ruleset, entry, handled);
  for (const char* entry : kEtcEntries) allow_reading(ruleset, std::string("/etc/") + entry, handled);
}

void enter_landlock(int abi, const SandboxPolicy& policy) {
  RulesetAttr attr;
  attr.handled_access_fs = handled_fs(abi);
  if (abi >= 4) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;  // no rule allows any
  if (abi >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  // The struct as long as this ABI knows it: older kernels refuse a longer one.
  const size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? offsetof(RulesetAttr, scoped) : offsetof(RulesetAttr, handled_access_net);
  const int ruleset = static_cast<int>(::syscall(__NR_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) fail("landlock_create_ruleset", errno);
  const uint64_t handled = attr.handled_access_fs;
  allow_system_reads(ruleset, handled);
  for (const std::string& path : loaded_library_reads()) allow_reading(ruleset, path, handled);
  for (const std::string& path : policy.readable) {
    if (!allow_reading(ruleset, path, handled)) fail("open " + path, errno);
  }
  const uint64_t write = kFsReadFile | kFsReadDir | kFsWriteFile | kFsRemoveDir | kFsRemoveFile | kFsMakeDir |
                         kFsMakeReg | kFsMakeSym | kFsRefer | kFsTruncate;
  for (const std::string& folder : policy.writable) {
    if (!allow(ruleset, folder, write, handled)) fail("open " + folder, errno);
  }
  for (const std::string& device : writable_devices()) {
    allow(ruleset, device, kFsReadFile | kFsWriteFile | kFsIoctlDev, handled);
  }
  const long restricted = ::syscall(__NR_landlock_restrict_self, ruleset, 0);
  const int err = errno;
  ::close(ruleset);
  if (restricted != 0) fail("landlock_restrict_self", err);
}

// A root worker keeps no capability but reading what its Landlock rules allow
// whoever owns it (CAP_DAC_READ_SEARCH: a model of another user's that root
// runs is reopened by /proc/self/fd/N): not the power to read other root
// processes' /proc entries (environ), which needs every capability they hold,
// nor to hang up a terminal, set the clock, or raise a limit.
void drop_capabilities() {
  for (int cap = 0; cap < 64; ++cap) {
    if (cap == CAP_DAC_READ_SEARCH) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) break;  // past the kernel's last
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) fail("capget", errno);
  const uint32_t keep = CAP_TO_MASK(CAP_DAC_READ_SEARCH);
  for (__user_cap_data_struct& d : data) d.inheritable = 0;
  data[0].permitted &= keep;
  data[0].effective &= keep;
  data[1].permitted = data[1].effective = 0;
  if (::syscall(SYS_capset, &header, data) != 0) fail("capset", errno);
}

// System calls a model never needs and an exploit would: EPERM.
constexpr long kDenied[] = {
    __NR_execve, __NR_execveat, __NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev, __NR_socket,
    __NR_unshare, __NR_setns, __NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot, __NR_bpf,
    __NR_perf_event_open, __NR_userfaultfd, __NR_keyctl, __NR_add_key, __NR_request_key, __NR_init_module,
    __NR_finit_module, __NR_delete_module, __NR_kexec_load, __NR_reboot, __NR_swapon, __NR_swapoff, __NR_acct,
    __NR_open_by_handle_at, __NR_settimeofday, __NR_clock_settime, __NR_adjtimex, __NR_sethostname,
    __NR_setdomainname, __NR_syslog, __NR_quotactl, __NR_clock_adjtime, __NR_vhangup,
    // Leaving the worker's session or process group, and the death signal
    // that ties it to its parent (prctl below): it would outlive tsarchive.
    __NR_setsid, __NR_setpgid,
    // Other processes by pid: renice (PRIO_USER reaches all of the user's),
    // signals from a pidfd, comparing or reaping them.
    __NR_setpriority, __NR_ioprio_set, __NR_tkill, __NR_kcmp,
    // Memory no limit counts: data queued in a socket pair's buffers is the
    // kernel's (196 pairs held 1.5 GiB the worker's RSS did not show). And
    // the user's inotify instances (128 by default), which a worker could
    // hold all of.
    __NR_socketpair, __NR_inotify_init1, __NR_fanotify_init,
#if defined(__x86_64__)
    __NR_inotify_init,
#endif
    424, 434, 438, 440, 448,  // pidfd_send_signal, pidfd_open, pidfd_getfd, process_madvise, process_mrelease
                              // (the same on x86_64 and aarch64; headers may be older than the kernel)
    // System V IPC and POSIX message queues: the user's other shared memory
    // segments and queues, which Landlock does not see.
    __NR_shmget, __NR_shmat, __NR_shmctl, __NR_shmdt, __NR_msgget, __NR_msgsnd, __NR_msgrcv, __NR_msgctl,
    __NR_semget, __NR_semop, __NR_semctl, __NR_semtimedop, __NR_mq_open, __NR_mq_unlink, __NR_mq_timedsend,
    __NR_mq_timedreceive, __NR_mq_notify, __NR_mq_getsetattr,
    // truncate(path): Landlock sees truncation only from ABI 3 (Linux 6.2).
    __NR_truncate,
    // Extended attributes travel with a file the worker wrote (stamp's copy
    // becomes the user's archive): an ACL or a user.* attribute set here would too.
    __NR_setxattr, __NR_lsetxattr, __NR_fsetxattr, __NR_removexattr, __NR_lremovexattr, __NR_fremovexattr,
#ifdef __NR_setxattrat
    __NR_setxattrat,
#endif
#ifdef __NR_removexattrat
    __NR_removexattrat,
#endif
    // Landlock has no right for a file's mode, owner or times: native code in
    // the worker (a custom operator, an AOTInductor package's library) could
    // make the user's files world-writable or rewrite their times anywhere.
    __NR_fchmod, __NR_fchmodat, __NR_fchown, __NR_fchownat, __NR_utimensat,
#if defined(__x86_64__)
    __NR_chmod, __NR_chown, __NR_lchown, __NR_utime, __NR_utimes, __NR_futimesat,
#endif
#ifdef __NR_fchmodat2
    __NR_fchmodat2,
#else
    452,  // fchmodat2 (Linux 6.6), newer than some headers
#endif
#if defined(__x86_64__)
    __NR_fork, __NR_vfork,  // see clone below
#endif
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
#endif
#ifdef __NR_fsopen
    __NR_fsopen, __NR_fsconfig, __NR_fsmount, __NR_fspick, __NR_move_mount, __NR_open_tree,
#endif
#ifdef __NR_mount_setattr
    __NR_mount_setattr,
#endif
#ifdef __NR_kexec_file_load
    __NR_kexec_file_load,
#endif
#if defined(__x86_64__)
    __NR_iopl, __NR_ioperm, __NR_uselib,
#endif
};

#ifndef __NR_clone3
#define __NR_clone3 435
#endif

constexpr uint32_t kNewNamespaces = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                                    CLONE_NEWPID | CLONE_NEWNET;

sock_filter statement(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter jump(uint16_t code, uint32_t k, uint8_t if_true, uint8_t if_false) {
  return BPF_JUMP(code, k, if_true, if_false);
}

void enter_seccomp() {
  const uint32_t deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  std::vector<sock_filter> f;
  // Another ABI's numbers (i386 through int 0x80 on x86_64) mean other calls: none allowed.
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
  f.push_back(statement(BPF_RET | BPF_K, deny));
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
  f.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));  // x32's numbers
  f.push_back(statement(BPF_RET | BPF_K, deny));
#endif
  // ioctl(fd, TIOCSTI) types into a terminal: on a copy of the user's tty a
  // model's native code would type commands into their shell (as root, even
  // on a tty that is not its controlling one). TIOCLINUX pastes the console
  // selection likewise. The kernel reads the request as 32 bits: so does this.
  // FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR set a file's attributes (nodump,
  // append-only, a project id): on stamp's copy they would travel to the
  // user's archive, as extended attributes would (below).
  constexpr uint32_t kDeniedIoctls[] = {TIOCSTI, TIOCLINUX, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR};
  constexpr auto kIoctls = static_cast<uint8_t>(std::size(kDeniedIoctls));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, kIoctls + 3));
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])));  // low half (little-endian)
  for (uint8_t i = 0; i < kIoctls; ++i) {
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, kDeniedIoctls[i], static_cast<uint8_t>(kIoctls - i), 0));
  }
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(statement(BPF_RET | BPF_K, deny));
  // `nr` only when argument `arg` (its low 32 bits: the kernel reads a pid,
  // or prctl's option, as an int) is one of `values`.
  const auto only_when = [&f, deny](long nr, size_t arg, std::initializer_list<uint32_t> values) {
    const auto n = static_cast<uint8_t>(values.size());
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(n + 3)));
    f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * arg)));
    uint8_t i = 0;
    for (const uint32_t value : values) f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, value, static_cast<uint8_t>(n - i++), 0));
    f.push_back(statement(BPF_RET | BPF_K, deny));
    f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  };
  // Calls that reach a process by its pid reach this one alone (0: "myself";
  // the filter is made in the worker, so its pid is known). Landlock's signal
  // scope (ABI 6) refuses signals to the parent on newer kernels; these
  // cover older ones, and calls that are not signals: prlimit(parent,
  // RLIMIT_CPU, 0) has the kernel kill the parent, and works on any process
  // of the user's. kill(0) and kill(-pgid) signal a whole process group.
  const auto self = static_cast<uint32_t>(::getpid());
  only_when(__NR_kill, 0, {self});
  only_when(__NR_tgkill, 0, {self});
  only_when(__NR_rt_sigqueueinfo, 0, {self});
  only_when(__NR_rt_tgsigqueueinfo, 0, {self});
  only_when(__NR_prlimit64, 0, {0, self});
  only_when(__NR_sched_setscheduler, 0, {0, self});
  only_when(__NR_sched_setparam, 0, {0, self});
  only_when(__NR_sched_setattr, 0, {0, self});
  // Moving another process's pages, reading its robust futex list (an
  // address), or its process group and session (whether it exists).
  only_when(__NR_migrate_pages, 0, {0, self});
  only_when(__NR_move_pages, 0, {0, self});
  only_when(__NR_get_robust_list, 0, {0, self});
  only_when(__NR_getpgid, 0, {0, self});
  only_when(__NR_getsid, 0, {0, self});
  // fcntl: F_SETOWN(_EX) with F_SETSIG has the kernel signal any process of
  // the user's (root's: any) when a descriptor becomes ready; F_SETLEASE on
  // the archive's shared descriptor would undo the parent's lease.
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_fcntl, 0, 7));
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, F_SETOWN, 3, 0));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, F_SETOWN_EX, 2, 0));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, F_SETSIG, 1, 0));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, F_SETLEASE, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, deny));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  // open(O_RDONLY | O_TRUNC) truncates a file Landlock before ABI 3 lets the
  // worker read (the user's archive by /proc/self/fd/N among them); nobody
  // means it. openat2's flags are behind a pointer: ENOSYS, as glibc's open
  // never uses it.
  const auto no_truncating_read = [&f, deny](long nr, size_t flags_arg) {
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 5));
    f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * flags_arg)));
    f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, O_TRUNC, 0, 2));   // no O_TRUNC: allow
    f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, O_ACCMODE, 1, 0));  // O_TRUNC and written: allow
    f.push_back(statement(BPF_RET | BPF_K, deny));
    f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  };
#if defined(__x86_64__)
  no_truncating_read(__NR_open, 1);
#endif
  no_truncating_read(__NR_openat, 2);
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, 437, 0, 1));  // openat2 (Linux 5.6)
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
  // prctl: anything but PR_SET_PDEATHSIG (1), which would unbind the worker
  // from its parent's death.
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 0, 4));
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_PDEATHSIG, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, deny));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  for (const long nr : kDenied) {
    f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    f.push_back(statement(BPF_RET | BPF_K, deny));
  }
  // clone3's flags are behind a pointer a filter cannot read: ENOSYS makes
  // glibc use clone, whose flags (first argument) are checked. Threads only:
  // a process the worker started would outlive it (its own session escapes
  // the worker's process group), holding what the worker had open, such as
  // the copy stamp writes and then renames over the user's archive.
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
  f.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
  f.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));  // low half (little-endian)
  f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, kNewNamespaces, 1, 0));                // to deny
  f.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0));                  // to allow
  f.push_back(statement(BPF_RET | BPF_K, deny));
  f.push_back(statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));

  sock_fprog program{static_cast<unsigned short>(f.size()), f.data()};
  if (::syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program) != 0) {
    fail("seccomp", errno);
  }
}

// The NVIDIA driver, started before the sandbox (sandbox.h). Where there is
// no libcuda, or cuInit fails here too, libtorch finds out again and says so.
// Once: prepare_sandbox starts it, and enter_sandbox (called alone by tests) too.
void start_cuda_driver() {
  static const bool started = [] {
    void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == nullptr) return false;
    using CuInit = int (*)(unsigned);
    const auto cu_init = reinterpret_cast<CuInit>(::dlsym(cuda, "cuInit"));
    return cu_init != nullptr && cu_init(0) == 0;
  }();
  (void)started;
}

int thread_count() {
  int threads = 0;
  if (DIR* tasks = ::opendir("/proc/self/task")) {
    while (const dirent* entry = ::readdir(tasks)) threads += entry->d_name[0] != '.';
    ::closedir(tasks);
  }
  return threads;
}

// What the worker's libraries and CUDA read from the environment (see
// sandbox.h): the C library's and the loader's, the thread pools' and BLAS
// libraries', CUDA's and NVIDIA's, libtorch's, the sanitizers', tsarchive's.
constexpr const char* kKeptVariables[] = {"PATH", "HOME", "USER", "LOGNAME", "TERM", "TZ", "LANG", "LANGUAGE",
                                          "TMPDIR", "LD_LIBRARY_PATH", "GLIBC_TUNABLES", "NO_COLOR",
                                          "SOURCE_DATE_EPOCH"};
constexpr const char* kKeptPrefixes[] = {"LC_",    "MALLOC_",  "OMP_",   "KMP_",    "GOMP_",  "MKL_",
                                         "OPENBLAS_", "BLIS_", "DNNL_",  "ONEDNN_", "CUDA_",  "CUDNN_",
                                         "CUBLAS", "NCCL_",    "NVIDIA_", "__NV",   "NV_",    "TORCH_",
                                         "PYTORCH_", "TORCHINDUCTOR_", "AOTI_", "C10_", "GLOG_", "KINETO_",
                                         "HIP_",   "ROCM_",    "HSA_",   "MIOPEN_", "ASAN_",  "UBSAN_",
                                         "LSAN_",  "TSARCHIVE_"};
// Never kept, whatever the prefix: NVIDIA_API_KEY is NGC's.
constexpr const char* kSecretWords[] = {"KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH", "COOKIE"};

// The process's initial environment block, where /proc/self/environ reads:
// fields 50 and 51 of /proc/self/stat (Linux 3.5).
std::pair<uintptr_t, uintptr_t> environment_block() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return {0, 0};
  std::istringstream fields(text.substr(paren + 1));
  std::string field;
  uintptr_t start = 0, end = 0;
  for (int number = 3; fields >> field; ++number) {  // the state is field 3
    if (number == 50) start = std::strtoull(field.c_str(), nullptr, 10);
    if (number == 51) end = std::strtoull(field.c_str(), nullptr, 10);
  }
  return start < end ? std::pair{start, end} : std::pair<uintptr_t, uintptr_t>{0, 0};
}

bool pid_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// The folder at `path` with whatever the worker made in it (remove_tree_at:
// nftw gave up at a folder deeper than PATH_MAX or of mode 0, and left the
// tree for good); false when something was left.
bool remove_tree(const std::string& path) {
  const auto [dir, name] = posix::split_path(path);
  const Fd parent(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return parent.get() >= 0 && remove_tree_at(parent.get(), name.c_str());
}

std::string temp_base() {
  const char* dir = std::getenv("TMPDIR");
  return dir != nullptr && *dir == '/' ? dir : "/tmp";
}

constexpr const char* kTempPrefix = "tsarchive-worker-";

// Folders "tsarchive-worker-PID-XXXXXX" that an interrupted tsarchive could
// not remove: its PID is gone and nobody holds the folder's lock (which also
// keeps the folder of a live process in another PID namespace).
void remove_dead_temp_folders(const std::string& base) {
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr) return;
  const size_t prefix = std::strlen(kTempPrefix);
  std::vector<std::string> dead;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, kTempPrefix, prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name + prefix, &end, 10);
    if (pid > 0 && *end == '-' && !pid_alive(static_cast<pid_t>(pid))) dead.push_back(base + "/" + entry->d_name);
  }
  ::closedir(dir);
  for (const std::string& path : dead) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) remove_tree(path);
    ::close(fd);
  }
}

}  // namespace

const SandboxSupport& sandbox_support() {
  static const SandboxSupport support = [] {
    SandboxSupport s;
    const char* env = std::getenv("TSARCHIVE_NO_SANDBOX");
    s.disabled = env != nullptr && std::string(env) == "1";
    s.landlock_abi = landlock_abi();
    s.seccomp = seccomp_filters();
    return s;
  }();
  return support;
}

std::string describe_sandbox(const SandboxSupport& s) {
  if (s.disabled) return "off (TSARCHIVE_NO_SANDBOX=1)";
  const std::string landlock = "landlock ABI " + std::to_string(s.landlock_abi);
  if (s.landlock_abi > 0 && s.seccomp) return landlock + " + seccomp";
  if (s.landlock_abi > 0) return landlock + " only (no seccomp filters for this kernel or CPU)";
  if (s.seccomp) return "seccomp only (no Landlock in this kernel: Linux 5.13+ with it enabled)";
  return "none (this kernel offers neither Landlock nor seccomp filters)";
}

std::string sandbox_note(const SandboxSupport& s) {
  if (s.disabled || (s.landlock_abi > 0 && s.seccomp)) return "";
  if (s.landlock_abi > 0) {
    return "the libtorch worker's sandbox has no seccomp filter here: a model's code is kept from writing files but "
           "not from starting programs or opening sockets";
  }
  if (s.seccomp) {
    return "the libtorch worker's sandbox has no Landlock here (Linux 5.13+ with it enabled): a model's code may "
           "write files wherever you can";
  }
  return "the libtorch worker runs without a sandbox here (no Landlock, no seccomp): a model's code may write files "
         "wherever you can";
}

bool worker_keeps_variable(const std::string& name) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* word : kSecretWords) {
    if (upper.find(word) != std::string::npos) return false;
  }
  if (std::find(std::begin(kKeptVariables), std::end(kKeptVariables), name) != std::end(kKeptVariables)) return true;
  return std::any_of(std::begin(kKeptPrefixes), std::end(kKeptPrefixes),
                     [&name](const char* prefix) { return name.rfind(prefix, 0) == 0; });
}

void scrub_environment() {
  const auto name_of = [](const char* entry) {
    const char* eq = std::strchr(entry, '=');
    return eq != nullptr ? std::string(entry, eq) : std::string(entry);
  };
  std::vector<std::string> dropped;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::string name = name_of(*entry); !worker_keeps_variable(name)) dropped.push_back(std::move(name));
  }
  for (const std::string& name : dropped) ::unsetenv(name.c_str());  // by name, before the names are zeroed
  // Every string of the initial block, also those a setenv() since replaced.
  const auto [start, end] = environment_block();
  for (uintptr_t at = start; at < end;) {
    char* entry = reinterpret_cast<char*>(at);
    const size_t length = ::strnlen(entry, end - at);
    if (!worker_keeps_variable(name_of(std::string(entry, length).c_str()))) std::memset(entry, 0, length);
    at += length + 1;
  }
}

SandboxPolicy job_policy(std::vector<std::string> writable, bool cuda, const std::string& archive,
                         const std::vector<std::string>& libraries) {
  SandboxPolicy policy{std::move(writable), cuda, {}};
  if (!archive.empty()) policy.readable.push_back(archive);
  for (const std::string& library : libraries) {
    char resolved[PATH_MAX];
    const std::string path = ::realpath(library.c_str(), resolved) != nullptr ? resolved : library;
    policy.readable.push_back(path);
    policy.readable.push_back(library_reads(path));
  }
  return policy;
}

void prepare_sandbox(const SandboxPolicy& policy, const std::function<void()>& load) {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled) {
    if (load) load();
    return;
  }
  if (policy.cuda) start_cuda_driver();
  const int threads = thread_count();
  if (load) load();
  if (thread_count() > threads) {
    fail("the torch layer started a thread while it loaded, which Landlock would not bind", EBUSY);
  }
  scrub_environment();
}

void enter_sandbox(const SandboxPolicy& policy) {
  const SandboxSupport& s = sandbox_support();
  if (s.disabled) return;
  if (policy.cuda) start_cuda_driver();
  // Needed by both without privileges, and no setuid program may gain any after.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("PR_SET_NO_NEW_PRIVS", errno);
  if (s.landlock_abi > 0) enter_landlock(s.landlock_abi, policy);
  drop_capabilities();
  if (s.seccomp) enter_seccomp();
}

Error explain_sandbox_refusal(const Error& e) {
  const auto says = [&e](const char* text) {
    return std::strstr(e.what(), text) != nullptr || e.detail().find(text) != std::string::npos;
  };
  if (!says("Permission denied") && !says("Operation not permitted")) return e;
  return Error(e.kind(), e.what(), e.file(),
               "the worker's sandbox refused it: the model's code tried to read or write outside the folders it is given, "
               "run a program or open a socket; do not load this archive outside a sandbox")
      .with_detail(e.detail());
}

namespace {

constexpr char kLibtorchTemplate[] = "/tmp/XXXXXX";  // AOTIModelPackageLoader's (sandbox.h)
char reserved_tmp[sizeof kLibtorchTemplate] = {};      // armed in a worker; empty: pass every call on

}  // namespace

void reserve_libtorch_tmp_folder(const std::string& name) {
  if (name.size() + 1 != sizeof reserved_tmp || name.rfind("/tmp/", 0) != 0) {
    throw Error(ErrorKind::Torch, "the folder reserved for libtorch is not of the form /tmp/XXXXXX: " + name);
  }
  std::memcpy(reserved_tmp, name.c_str(), sizeof reserved_tmp);
}

ReservedLibtorchFolder::ReservedLibtorchFolder() {
  std::string pattern = kLibtorchTemplate;
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw_io(std::string("cannot make a folder for libtorch to unpack the package into: ") + std::strerror(errno),
             "/tmp", "/tmp must be writable: libtorch 2.x unpacks AOTInductor packages there");
  }
  path_ = pattern;
}

ReservedLibtorchFolder::~ReservedLibtorchFolder() { remove_tree(path_); }

WorkerTempFolder::WorkerTempFolder() {
  const std::string base = temp_base();
  remove_dead_temp_folders(base);
  std::string pattern = base + "/" + kTempPrefix + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw_io(std::string("cannot make the libtorch worker's temporary folder: ") + std::strerror(errno), base,
             "set TMPDIR to a writable folder");
  }
  path_ = pattern;
  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);
}

WorkerTempFolder::~WorkerTempFolder() {
  remove_tree(path_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tsarchive

// The C library's mkdtemp, but for the one call reserve_libtorch_tmp_folder
// armed (sandbox.h). Exported from the binary, so libtorch's call binds here.
extern "C" __attribute__((visibility("default"))) char* mkdtemp(char* pattern) {
  using Mkdtemp = char* (*)(char*);
  static const auto next = reinterpret_cast<Mkdtemp>(::dlsym(RTLD_NEXT, "mkdtemp"));
  char* const reserved = tsarchive::reserved_tmp;
  if (reserved[0] != '\0' && std::strcmp(pattern, tsarchive::kLibtorchTemplate) == 0) {
    std::memcpy(pattern, reserved, sizeof tsarchive::reserved_tmp);
    reserved[0] = '\0';  // once: a second package would share the folder
    return pattern;
  }
  if (next == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  return next(pattern);
}
