// The libtorch worker process; see worker.h for why.
#include "worker/worker.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <iostream>
#include <memory>
#include <new>
#include <thread>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/strings.h"
#include "core/edit/file_edit.h"
#include "worker/disk_use.h"
#include "worker/sandbox.h"
#include "worker/worker_output.h"

namespace tsarchive {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr int kPollMs = 20;
constexpr auto kDiskLookEvery = std::chrono::milliseconds(100);  // disk_use.h

// What a worker says it is doing (announce_worker_activity), in a page it
// shares with its parent: a limit or a crash is reported against it rather
// than the job's activity. Written only by the worker, read by the parent
// once the worker has ended.
struct ActivityPage {
  uint32_t length = 0;
  char text[252];
};
ActivityPage* announced_activity = nullptr;  // in a worker: its page

class SharedActivityPage {
 public:
  SharedActivityPage() {
    void* page = ::mmap(nullptr, sizeof(ActivityPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    page_ = page == MAP_FAILED ? nullptr : new (page) ActivityPage();  // without one, the job's activity is said
  }
  ~SharedActivityPage() {
    if (page_ != nullptr) ::munmap(page_, sizeof(ActivityPage));
  }
  SharedActivityPage(const SharedActivityPage&) = delete;
  SharedActivityPage& operator=(const SharedActivityPage&) = delete;

  ActivityPage* get() const { return page_; }
  // What the worker announced last, or `job_activity` when nothing (or "").
  std::string activity_or(const std::string& job_activity) const {
    if (page_ == nullptr || page_->length == 0 || page_->length > sizeof page_->text) return job_activity;
    return std::string(page_->text, page_->length);
  }

 private:
  ActivityPage* page_ = nullptr;
};

// The child: never returns. `temp`: its temporary folder, null without the
// sandbox (TSARCHIVE_NO_SANDBOX=1).
[[noreturn]] void serve(int fd, pid_t parent, const WorkerJob& job, const WorkerTempFolder* temp,
                        const ReservedLibtorchFolder* libtorch_tmp, const OutputRelay& relay, const std::function<void()>& load,
                        const std::function<std::string()>& work) {
  // Die with the parent; no core dumps of a crash on a hostile file; the
  // parent's handlers that remove its temp files are the parent's business.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  const struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
  // A crash ends the worker by its signal, which the parent names. (In
  // sanitizer builds ASan's handler would turn it into a report and exit 1;
  // what the instrumentation itself finds is still reported.)
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGXFSZ}) ::signal(sig, SIG_DFL);
  limit_worker_files(job.limits.disk_bytes);  // a write past it ends the worker with SIGXFSZ

  // None of the user's descriptors stays with code from the file (worker_output.h).
  const int notes = relay.attach_child(false);
  if (notes < 0) ::_exit(127);
  const int keep[] = {fd, notes, job.archive.fd};
  close_inherited_descriptors(keep, std::size(keep));
  // The parent's locks and lease stay the parent's; a worker that would share
  // its description does not run.
  if (job.archive.fd >= 0 && !reopen_own_description(job.archive.fd)) ::_exit(127);
  use_notes_descriptor(notes);

  std::string payload;
  try {
    if (temp != nullptr) {
      // While this process has one thread, before libtorch reads the archive (sandbox.h).
      ::setenv("TMPDIR", temp->path().c_str(), 1);
      SandboxPolicy policy =
          job_policy(job.writable, job.cuda, job.archive.descriptor_path(),
                     job.libraries);
      policy.writable.push_back(temp->path());
      if (libtorch_tmp != nullptr) {
        reserve_libtorch_tmp_folder(libtorch_tmp->path());
        policy.writable.push_back(libtorch_tmp->path());
      }
      prepare_sandbox(policy, load);
      enter_sandbox(policy);
    } else if (load) {
      load();
    }
    payload = work();
  } catch (const Error& e) {
    payload = encode_error(temp != nullptr ? explain_sandbox_refusal(e) : e);
  } catch (const std::exception& e) {
    const Error error(ErrorKind::Torch, std::string("libtorch failed: ") + e.what());
    payload = encode_error(temp != nullptr ? explain_sandbox_refusal(error) : error);
  } catch (...) {
    payload = encode_error(Error(ErrorKind::Torch, "libtorch failed with an exception that is not a std::exception"));
  }
  std::cout.flush();
  std::cerr.flush();
  write_fully(fd, payload);  // false: the parent is gone or gave up on us
  // No destructors, no atexit handlers: libtorch's teardown is not ours to run.
  ::_exit(0);
}

// What a limit or a crash in the worker says about the archive. One that
// passed the checks is not thereby suspect: libtorch bugs, custom operators and
// code compiled for another machine crash too, so the message lists the
// causes instead of calling the file hostile.
std::string suspicion(const WorkerJob& job) {
  if (job.validated && job.compiled_package) {
    return "the package passed tsarchive's checks and its metadata matches this machine as far as it records it; the "
           "likely cause is compiled code built for another GPU, CUDA or PyTorch than this libtorch's (or a libtorch bug)";
  }
  return job.validated ? "the archive passed tsarchive's checks, so the cause is not known: a libtorch bug, a custom "
                         "operator, code compiled for another machine, or a file made to crash libtorch"
                       : "the archive, which was not checked (--no-validate), may be corrupt or hostile";
}

std::string crash_hint(const WorkerJob& job, int sig) {
  if (!job.validated) return "run 'tsarchive verify' on it";
  if (sig == SIGILL) {
    return "an illegal instruction usually means compiled code (an AOTInductor package, a custom operator) "
           "built for a CPU with features this one lacks: compile it for this machine's CPU";
  }
  if (job.compiled_package) {
    return "load it with this libtorch's PyTorch (torch._inductor.aoti_load_package); if that crashes too, compile it "
           "again with that PyTorch on this machine, else please report the file to tsarchive";
  }
  return "try it with the PyTorch that wrote it; if it runs there, please report the file to tsarchive";
}

enum class Stop { None, Usage, Time, Payload, Written, Disk };

// What supervise() saw of a worker: why it was stopped (None: it ended on
// its own), its wait status and what it sent; with Stop::Disk `disk_why` says
// what it wrote, with Stop::Usage `usage` what it passed.
struct Supervised {
  Stop stop = Stop::None;
  int status = 0;
  std::string payload;
  std::string disk_why;
  UsagePassed usage;
};

// Reads the child's payload while enforcing the limits. `folders`: those it may write.
Supervised supervise(pid_t pid, int fd, const WorkerLimits& limits, const std::vector<std::string>& folders,
                     const WatchedFile& archive) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // A result is never larger than the memory the worker may use.
  const uint64_t max_payload = limits.memory_bytes != 0 ? limits.memory_bytes : 64 * kGiB;
  Supervised out;
  bool open = true;
  bool exited = false;
  int waits_after_eof = 0;
  auto disk_looked = start;
  uint64_t files_in_memory = 0;  // memfds, files on a tmpfs: memory too, as of the last look
  const auto disk_passed = [&] {
    if (Clock::now() - disk_looked < kDiskLookEvery) return false;
    disk_looked = Clock::now();
    const DiskUse use = measure_disk_use(pid, folders);
    files_in_memory = use.memory_bytes - use.memory_mapped_bytes;
    out.disk_why = disk_limit_passed(use, limits.disk_bytes);
    return !out.disk_why.empty();
  };
  char buffer[1 << 16];
  while (open || !exited) {
    if (open) {
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, kPollMs);
      if (ready > 0) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n > 0) {
          out.payload.append(buffer, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          open = false;
        }
      }
    } else {
      // The pipe closed: the worker is ending. Look again soon, then less often.
      ::usleep(++waits_after_eof < 50 ? 1000 : kPollMs * 1000);
    }
    if (!exited) {
      const pid_t done = ::waitpid(pid, &out.status, WNOHANG);
      exited = done == pid;
      // A grandchild may hold the pipe: once the worker is gone, stop waiting for EOF.
      if (exited && open) {
        ::fcntl(fd, F_SETFL, O_NONBLOCK);
        ssize_t n;
        while ((n = ::read(fd, buffer, sizeof buffer)) > 0) out.payload.append(buffer, static_cast<size_t>(n));
        open = false;
      }
    }
    if (exited) break;
    if (archive.leased && !archive.unchanged()) {
      out.stop = Stop::Written;  // a writer waits on the lease: the worker goes before any new byte reaches it
    } else if (out.payload.size() > max_payload) {
      out.stop = Stop::Payload;
    } else if ((out.usage = worker_usage_passed(worker_usage(pid), out.payload.size() + files_in_memory, limits.memory_bytes))) {
      out.stop = Stop::Usage;  // what it sent is held here for it: one budget, or a worker could flood the parent
    } else if (limits.time_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() > limits.time_s) {
      out.stop = Stop::Time;
    } else if (disk_passed()) {
      out.stop = Stop::Disk;
    }
    if (out.stop != Stop::None) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &out.status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
  }
  return out;
}

// `why`: from disk_limit_passed, or the SIGXFSZ that RLIMIT_FSIZE sent.
Error disk_limit_error(const WorkerJob& job, const std::string& activity, const std::string& why) {
  return Error(ErrorKind::Torch,
               "libtorch's worker " + why + " while " + activity + " and was stopped; what it wrote is removed" +
                   (job.validated ? "" : "; " + suspicion(job)),
               job.file, "if the model needs more room, raise --disk-limit; if it should not write, the archive may be hostile");
}

Error archive_written(const WorkerJob& job) {
  return Error(ErrorKind::Io,
               "the file was written while tsarchive used it (after its checks, before or while libtorch read it): "
               "what libtorch made of it is not what was checked, and is not reported",
               job.file, "run it again when nothing writes the file; keep model files where only their owner may write");
}

}  // namespace

void announce_worker_activity(const std::string& activity) {
  if (announced_activity == nullptr) return;
  const size_t n = std::min(activity.size(), sizeof announced_activity->text);
  announced_activity->length = 0;  // a worker stopped mid-copy leaves the job's activity said
  std::memcpy(announced_activity->text, activity.data(), n);
  announced_activity->length = static_cast<uint32_t>(n);
}

void check_archive_unchanged(const WorkerJob& job) {
  if (job.archive.fd < 0 || job.archive.unchanged()) return;
  throw archive_written(job);
}

// RssAnon + RssShmem in /proc/PID/status: MAP_SHARED|MAP_ANONYMOUS memory
// and touched memfd or /dev/shm mappings are the worker's too.
WorkerUsage worker_usage(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  WorkerUsage usage;
  uint64_t kib = 0;
  while (std::getline(status, line)) {
    const auto value = [&line] { return std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10); };
    if (line.rfind("RssAnon:", 0) == 0 || line.rfind("RssShmem:", 0) == 0) kib += value();
    if (line.rfind("Threads:", 0) == 0) usage.threads = value();
  }
  usage.resident_bytes = kib * 1024;
  return usage;
}

uint64_t max_worker_threads() {
  static const uint64_t most = std::max<uint64_t>(1024, 16 * uint64_t{std::thread::hardware_concurrency()});
  return most;
}

UsagePassed worker_usage_passed(const WorkerUsage& usage, uint64_t held, uint64_t memory_limit) {
  if (memory_limit != 0 && usage.resident_bytes + held > memory_limit) {
    return {"libtorch passed the memory limit (" + human_size(memory_limit) + " resident, --memory-limit)",
            "if the model needs more, raise --memory-limit"};
  }
  if (usage.threads > max_worker_threads()) {
    return {"libtorch's worker started more than " + std::to_string(max_worker_threads()) + " threads",
            "libtorch needs a few threads a core; a model that starts thousands may be hostile"};
  }
  return {};
}

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  const char* description = ::sigdescr_np(sig);
  std::string text = abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  if (description != nullptr) text += std::string(" (") + description + ")";
  return text;
}

bool worker_disabled() {
  const char* env = std::getenv("TSARCHIVE_IN_PROCESS");
  return env != nullptr && std::string(env) == "1";
}

std::string run_in_worker(const WorkerJob& job, const std::function<std::string()>& work,
                          const std::function<void()>& load) {
  if (worker_disabled()) {
    if (load) load();
    return work();
  }

  std::unique_ptr<WorkerTempFolder> temp;
  std::unique_ptr<ReservedLibtorchFolder> libtorch_tmp;
  if (!sandbox_support().disabled) {
    temp = std::make_unique<WorkerTempFolder>();
    if (job.compiled_package) libtorch_tmp = std::make_unique<ReservedLibtorchFolder>();
  }
  // Held while the worker lives (file_edit.h): a writer that comes now waits,
  // and the worker is stopped before it can read a new byte.
  WatchedFile archive = job.archive;
  // One the opener holds already (FileAccess::ReadHeld) is its to let go.
  struct HeldLease {  // let go however this ends: no writer waits on a finished worker
    WatchedFile& file;
    bool ours;
    ~HeldLease() {
      if (ours) file.release_lease();
    }
  } held{archive, !archive.leased};
  if (held.ours && archive.fd >= 0) archive.take_lease();
  const auto believed = [&archive] { return archive.fd < 0 || archive.unchanged(); };
  if (!believed()) throw archive_written(job);
  OutputRelay relay;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::Torch, std::string("cannot start the libtorch worker: ") + std::strerror(errno), job.file,
                "check the process and file limits (ulimit -u, ulimit -n)");
  }
  const SharedActivityPage activity_page;
  std::cout.flush();
  std::cerr.flush();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(ErrorKind::Torch, std::string("cannot start the libtorch worker: ") + std::strerror(err), job.file,
                "check the process limit (ulimit -u) and free memory");
  }
  if (pid == 0) {
    ::close(fds[0]);
    announced_activity = activity_page.get();
    serve(fds[1], parent, job, temp.get(), libtorch_tmp.get(), relay, load, work);
  }
  ::close(fds[1]);
  relay.start(STDERR_FILENO);
  StagingFolder::watch_child(pid);  // an interrupt kills it before removing what it writes into
  std::vector<std::string> folders = job.writable;
  if (temp) folders.push_back(temp->path());
  if (libtorch_tmp) folders.push_back(libtorch_tmp->path());
  Supervised supervised = supervise(pid, fds[0], job.limits, folders, archive);
  StagingFolder::watch_child(0);
  relay.finish();
  ::close(fds[0]);
  if (!believed()) throw archive_written(job);  // before any result, limit or crash of the worker's is believed

  const int status = supervised.status;
  const std::string activity = activity_page.activity_or(job.activity);
  switch (supervised.stop) {
    case Stop::Usage:
      throw Error(ErrorKind::Torch,
                  supervised.usage.why + " while " + activity + " and was stopped" + (job.validated ? "" : "; " + suspicion(job)),
                  job.file, supervised.usage.hint);
    case Stop::Time:
      throw Error(ErrorKind::Torch,
                  "libtorch did not finish within the time limit (" + short_number(job.limits.time_s) + " s" +
                      ", --time-limit) while " + activity + " and was stopped",
                  job.file, "if the model needs longer, raise --time-limit; if it should not, the archive may be hostile");
    case Stop::Written:  // believed() above has thrown this already
      throw archive_written(job);
    case Stop::Disk:
      throw disk_limit_error(job, activity, supervised.disk_why);
    case Stop::Payload:
      throw Error(ErrorKind::Torch, "the libtorch worker sent back more than its memory limit while " + activity,
                  job.file, suspicion(job));
    case Stop::None:
      break;
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) {
    throw disk_limit_error(job, activity, "wrote a file past the disk limit (" + human_size(job.limits.disk_bytes) + ", --disk-limit)");
  }
  if (WIFSIGNALED(status)) {
    throw Error(ErrorKind::Torch,
                "libtorch crashed with " + signal_text(WTERMSIG(status)) + " while " + activity + "; " + suspicion(job),
                job.file, crash_hint(job, WTERMSIG(status)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || supervised.payload.empty()) {
    throw Error(ErrorKind::Torch,
                "libtorch ended its worker (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                    ") while " + activity + " without a result; " + suspicion(job),
                job.file, crash_hint(job, 0));
  }
  return std::move(supervised.payload);
}

void load_job_libraries(const WorkerJob& job) {
  for (const std::string& path : job.libraries) {
    // RTLD_GLOBAL: operator libraries may depend on each other's symbols.
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = ::dlerror();
      std::string reason = why ? why : "unknown error";
      if (reason.rfind(path + ": ", 0) == 0) reason = reason.substr(path.size() + 2);  // the file goes in ( ) once
      throw Error(ErrorKind::Torch, "cannot load --load-library: " + reason, path,
                  "give the path of a shared library of custom operators or classes built against this libtorch");
    }
  }
}

}  // namespace tsarchive
