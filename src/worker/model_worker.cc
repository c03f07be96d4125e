// serve's long-lived libtorch worker; see model_worker.h for why it execs.
#include "worker/model_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/strings.h"
#include "worker/disk_use.h"
#include "worker/worker_codec.h"
#include "worker/worker_output.h"

namespace tsarchive {
namespace {

constexpr int kPollMs = 20;
// The first byte of a request frame after the load: what it asks for.
constexpr char kInfer = 'I';
constexpr char kStats = 'S';
constexpr uint64_t kMaxFrame = uint64_t{16} << 30;  // beyond any tensor a request may carry
// A model's description (its methods' schemas) and its operator statistics
// are small; a worker that says otherwise is not believed.
constexpr uint64_t kMaxStatusReply = uint64_t{64} << 20;

bool write_frame(int fd, const std::string& payload) {
  char header[8];
  uint64_t size = payload.size();
  for (char& c : header) {
    c = static_cast<char>(size & 0xff);
    size >>= 8;
  }
  return write_fully(fd, std::string_view(header, sizeof header)) && write_fully(fd, payload);
}

uint64_t frame_size(const std::string& header) {
  uint64_t size = 0;
  for (size_t i = 8; i-- > 0;) size = (size << 8) | static_cast<unsigned char>(header[i]);
  return size;
}

// Blocking read of one frame (the worker's side). False at EOF or on an error.
bool read_frame(int fd, std::string& payload) {
  const auto read_exact = [fd](std::string& out, size_t size) {
    out.resize(size);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::read(fd, out.data() + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  };
  std::string header;
  if (!read_exact(header, 8)) return false;
  const uint64_t size = frame_size(header);
  return size <= kMaxFrame && read_exact(payload, size);
}

// The bytes of the tensors in a value, and inside it.
uint64_t tensor_bytes(const HostValue& v) {
  uint64_t total = v.kind == HostValue::Kind::Tensor && v.tensor.bytes ? v.tensor.bytes->size() : 0;
  for (const HostValue& item : v.items) total += tensor_bytes(item);
  for (const auto& entry : v.entries) total += tensor_bytes(entry.second);
  return total;
}

std::string error_payload(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& error) {
    return encode_error(sandbox_support().disabled ? error : explain_sandbox_refusal(error));
  } catch (const std::exception& error) {
    return encode_error(Error(ErrorKind::Torch, std::string("libtorch failed: ") + error.what()));
  } catch (...) {
    return encode_error(Error(ErrorKind::Torch, "libtorch failed with an exception that is not a std::exception"));
  }
}

// N of "/proc/self/fd/N", the checked archive's path; -1 for another path.
int descriptor_in(const std::string& path) {
  const std::string prefix = "/proc/self/fd/";
  return path.rfind(prefix, 0) == 0 ? std::atoi(path.c_str() + prefix.size()) : -1;
}

}  // namespace

ModelWorker::ModelWorker(WorkerJob job, ServeModelRequest request, std::string executable)
    : job_(std::move(job)), request_(std::move(request)), executable_(std::move(executable)) {}

ModelWorker::~ModelWorker() { stop(); }

void ModelWorker::kill() const {
  if (const pid_t pid = pid_.load(); pid > 0) ::kill(pid, SIGKILL);
}

int ModelWorker::reap() {
  int status = 0;
  if (const pid_t pid = pid_.exchange(-1); pid > 0) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (relay_) relay_->finish();  // what it printed before it ended
  return status;
}

void ModelWorker::stop() {
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  to_worker_ = from_worker_ = -1;
  kill();
  reap();
  relay_.reset();
  temp_.reset();
}

ServedModelInfo ModelWorker::start() {
  stop();
  // A restart loads the file again: only if it is still what was checked.
  check_archive_unchanged(job_);
  if (!sandbox_support().disabled) temp_ = std::make_unique<WorkerTempFolder>();
  const char* temp = temp_ != nullptr ? temp_->path().c_str() : nullptr;
  relay_ = std::make_unique<OutputRelay>();  // first: when it throws, no pipe is left open
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::Torch, std::string("cannot start the libtorch worker: ") + std::strerror(errno), job_.file,
                "check the process and file limits (ulimit -u, ulimit -n)");
  }
  if (::pipe2(from, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(to[0]);
    ::close(to[1]);
    throw Error(ErrorKind::Torch, std::string("cannot start the libtorch worker: ") + std::strerror(err), job_.file,
                "check the process and file limits (ulimit -u, ulimit -n)");
  }
  // The archive the core checked, by descriptor: kept open across the exec.
  const int archive_fd = descriptor_in(request_.archive);
  const std::string exe = executable_;
  const std::string in_arg = std::to_string(to[0]), out_arg = std::to_string(from[1]);
  const OutputRelay& relay = *relay_;
  const std::string notes_arg = std::to_string(relay.child_notes_descriptor());
  const pid_t parent = ::getpid();
  const uint64_t disk_limit = job_.limits.disk_bytes;
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {to[0], to[1], from[0], from[1]}) ::close(fd);
    throw Error(ErrorKind::Torch, std::string("cannot start the libtorch worker: ") + std::strerror(err), job_.file,
                "check the process limit (ulimit -u) and free memory");
  }
  if (pid == 0) {
    // Only async-signal-safe calls until the exec. Its own process group: a
    // Ctrl-C at the terminal stops the server, which then ends its workers.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ}) ::signal(sig, SIG_DFL);
    limit_worker_files(disk_limit);  // a write past it ends the worker with SIGXFSZ (disk_use.h)
    // The pipes' worker ends and the archive survive the exec; fds 0, 1 and
    // 2 become /dev/null and the relay's pipe (worker_output.h).
    for (int fd : {to[0], from[1], archive_fd}) {
      if (fd >= 0 && ::fcntl(fd, F_SETFD, 0) != 0) ::_exit(127);
    }
    if (relay.attach_child(true) < 0) ::_exit(127);
    const char* argv[] = {"tsarchive", "__model-worker", in_arg.c_str(), out_arg.c_str(), notes_arg.c_str(), temp, nullptr};
    ::execv(exe.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(to[0]);
  ::close(from[1]);
  relay_->start(STDERR_FILENO);
  pid_ = pid;
  to_worker_ = to[1];
  from_worker_ = from[0];
  ServedModelInfo info;
  try {
    info = decode_result<ServedModelInfo>(call(encode_result(request_), "loading the module", kMaxStatusReply, false));
  } catch (const ReplyTooLarge& e) {
    stop();
    throw Error(ErrorKind::Torch, "the libtorch worker described the model in " + std::to_string(e.reply_bytes()) +
                                      " bytes, more than a description takes, and was stopped",
                job_.file, "if the model is what you think it is, please report it to tsarchive");
  }
  try {
    check_archive_unchanged(job_);
  } catch (...) {
    stop();
    throw;
  }
  return info;
}

std::vector<NamedTensor> ModelWorker::infer(const std::vector<HostValue>& inputs, uint64_t max_reply_bytes) {
  if (!alive()) throw Error(ErrorKind::Torch, "the libtorch worker is not running", job_.file, "it is being restarted");
  // The frame is built once, its kind byte first, with room for the tensors'
  // bytes (no second copy of them, nor one while the string grows).
  std::string frame(1, kInfer);
  uint64_t bytes = 0;
  for (const HostValue& v : inputs) bytes += tensor_bytes(v);
  frame.reserve(1 + bytes + 4096);
  encode_result_into(inputs, frame);
  return decode_result<std::vector<NamedTensor>>(call(std::move(frame), "running " + request_.method, max_reply_bytes));
}

ServedStats ModelWorker::stats() {
  if (!alive()) throw Error(ErrorKind::Torch, "the libtorch worker is not running", job_.file, "it is being restarted");
  return decode_result<ServedStats>(call(std::string(1, kStats), "reading its operator statistics", kMaxStatusReply));
}

namespace {

std::string exit_text(int status, uint64_t disk_limit) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) {
    return "libtorch's worker wrote a file past the disk limit (" + human_size(disk_limit) + ", --disk-limit) and was stopped";
  }
  return WIFSIGNALED(status) ? "libtorch crashed with " + signal_text(WTERMSIG(status))
                             : "the libtorch worker ended (exit status " +
                                   std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
}

}  // namespace

bool ModelWorker::ended(std::string& why) {
  const pid_t pid = pid_.load();
  if (pid <= 0) return false;
  // Looked at without reaping (WNOWAIT): reap() clears pid_ first.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid) {
    return false;
  }
  why = exit_text(reap(), job_.limits.disk_bytes);
  stop();
  return true;
}

std::string ModelWorker::over_limit(uint64_t held) {
  const pid_t pid = pid_.load();
  if (pid <= 0) return {};
  const auto now = std::chrono::steady_clock::now();
  if (now - disk_looked_ >= std::chrono::milliseconds(100)) {
    disk_looked_ = now;
    std::vector<std::string> folders;
    if (temp_) folders.push_back(temp_->path());
    const DiskUse use = measure_disk_use(pid, folders);
    files_in_memory_ = use.memory_bytes - use.memory_mapped_bytes;
    if (const std::string why = disk_limit_passed(use, job_.limits.disk_bytes); !why.empty()) {
      return "libtorch's worker " + why + " and was stopped";
    }
  }
  const UsagePassed usage = worker_usage_passed(worker_usage(pid), held + files_in_memory_, job_.limits.memory_bytes);
  return usage ? usage.why + " and was stopped" : std::string();
}

bool ModelWorker::stopped_at_limit(std::string& why) {
  why = over_limit();
  if (why.empty()) return false;
  stop();
  return true;
}

void ModelWorker::died(int status, const std::string& activity, const std::string& why) {
  const std::string what = why.empty() ? exit_text(status, job_.limits.disk_bytes) : why;
  stop();
  throw Error(ErrorKind::Torch, what + " while " + activity, job_.file,
              "the worker is restarted; if this repeats, check the model with 'tsarchive run'");
}

std::string ModelWorker::call(std::string payload, const std::string& activity, uint64_t max_reply_bytes, bool drain) {
  using Clock = std::chrono::steady_clock;
  // A worker that exits closes its end: the write fails with EPIPE (SIGPIPE is
  // ignored by the server) and the read below sees EOF.
  write_frame(to_worker_, payload);
  std::string().swap(payload);  // gone before the reply comes
  const auto start = Clock::now();
  auto looked = start;
  std::string header, body;
  uint64_t want = 8;
  uint64_t got = 0;  // of the current part: the header, then the body
  bool dropping = false;  // a reply over max_reply_bytes: read to keep the pipe in step, not kept
  std::string* into = &header;
  char buffer[1 << 16];
  while (true) {
    // The limits hold whether or not bytes flow: a worker that sends a byte
    // every few milliseconds is still stopped on time. What it sent and is
    // held here counts with its memory, as the one-shot worker's does.
    const auto now = Clock::now();
    if (job_.limits.time_s > 0 && std::chrono::duration<double>(now - start).count() > job_.limits.time_s) {
      died(0, activity, "libtorch did not finish within the time limit (" + short_number(job_.limits.time_s) +
                            " s, --time-limit) and was stopped");
    }
    if (now - looked >= std::chrono::milliseconds(kPollMs)) {
      looked = now;
      if (const std::string why = over_limit(body.size()); !why.empty()) died(0, activity, why);
    }
    pollfd p{from_worker_, POLLIN, 0};
    const int ready = ::poll(&p, 1, kPollMs);
    if (ready <= 0) continue;
    const size_t room = static_cast<size_t>(std::min<uint64_t>(sizeof buffer, want - got));
    const ssize_t n = ::read(from_worker_, buffer, room);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) died(reap(), activity, "");
    if (!dropping) into->append(buffer, static_cast<size_t>(n));
    got += static_cast<uint64_t>(n);
    if (got < want) continue;
    if (into == &body) {
      if (dropping) throw ReplyTooLarge(want, max_reply_bytes, job_.file);
      return body;
    }
    want = frame_size(header);
    if (want > kMaxFrame) died(0, activity, "the libtorch worker sent a malformed reply");
    dropping = want > max_reply_bytes;
    if (dropping && !drain) throw ReplyTooLarge(want, max_reply_bytes, job_.file);
    into = &body;
    got = 0;
    if (want == 0) return body;
  }
}

int model_worker_main(int in_fd, int out_fd, int notes_fd, const char* temp) {
  std::string frame;
  if (!read_frame(in_fd, frame)) return 1;
  std::unique_ptr<ServedModel> model;
  try {
    const ServeModelRequest request = decode_result<ServeModelRequest>(frame);
    // What the server (or whatever started it) left open without
    // close-on-exec goes; the archive the core checked stays.
    const int keep[] = {in_fd, out_fd, notes_fd, descriptor_in(request.archive)};
    close_inherited_descriptors(keep, std::size(keep));
    // The server's locks stay the server's; a worker that would share its
    // description does not run.
    if (const int archive = descriptor_in(request.archive); archive >= 0 && !reopen_own_description(archive)) {
      throw Error(ErrorKind::Io, "the worker cannot open the archive again (/proc/self/fd)", request.display_name,
                  "/proc must be mounted");
    }
    use_notes_descriptor(notes_fd);
    if (temp != nullptr) {
      // Right after the exec, while it has one thread (sandbox.h).
      ::setenv("TMPDIR", temp, 1);
      const SandboxPolicy policy = job_policy({temp}, is_cuda_device(request.device), request.archive, request.libraries);
      prepare_sandbox(policy, [] { load_torch_backend(); });
      enter_sandbox(policy);
    }
    TorchBackend& torch = load_torch_backend();
    WorkerJob job;
    job.file = request.display_name;
    job.libraries = request.libraries;
    load_job_libraries(job);
    model = torch.open_served(request);
    if (!write_frame(out_fd, encode_result(model->info()))) ::_exit(1);
  } catch (...) {
    write_frame(out_fd, error_payload(std::current_exception()));
    ::_exit(0);
  }
  while (read_frame(in_fd, frame)) {
    std::string reply;
    try {
      if (frame.empty() || (frame[0] != kInfer && frame[0] != kStats)) ::_exit(1);  // not the server speaking
      if (frame[0] == kStats) {
        reply = encode_result(model->stats());
      } else {
        frame.erase(0, 1);
        reply = encode_result(model->infer(decode_result<std::vector<HostValue>>(frame)));
      }
    } catch (...) {
      reply = error_payload(std::current_exception());
    }
    if (!write_frame(out_fd, reply)) break;
  }
  // No destructors: libtorch's teardown is not ours to run, and once
  // sandboxed (no ptrace) a sanitizer build's exit-time leak check could not
  // run either: every way out past the sandbox is _exit.
  ::_exit(0);
}

}  // namespace tsarchive
