#include "worker/worker_output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/terminal_text.h"
#include "contract/torch_backend.h"

namespace tsarchive {
namespace {

constexpr size_t kMaxLine = 4096;  // a longer line is forwarded in pieces
constexpr std::string_view kOutputPrefix = "tsarchive: model output: ";
// The torch layer's notes (libtorch_warnings.h): libtorch's warnings, and the
// model's own. Native code in the worker can write this pipe too, so a line
// passes as a note only under these names, and at worst fakes one of
// libtorch's warnings, never a line of tsarchive's own.
constexpr std::string_view kNotePrefixes[] = {"tsarchive: note: libtorch: ", "tsarchive: note: the model warns: "};

bool is_note(std::string_view line) {
  for (const std::string_view prefix : kNotePrefixes) {
    if (line.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// std::cerr's buffer in the worker: straight to the notes pipe.
class FdBuffer : public std::streambuf {
 public:
  explicit FdBuffer(int fd) : fd_(fd) {}

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      const char ch = traits_type::to_char_type(c);
      write_fully(fd_, std::string_view(&ch, 1));
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    write_fully(fd_, std::string_view(s, static_cast<size_t>(n)));
    return n;
  }

 private:
  int fd_;
};

// One pipe's bytes, cut into lines and forwarded within the budget.
class LineForwarder {
 public:
  // The notes' budget is a little larger than the torch layer's own, so its
  // line saying it left warnings out still gets through.
  LineForwarder(int out, bool notes)
      : out_(out), notes_(notes), budget_(notes ? OutputRelay::kMaxForwarded + 2 * kMaxLine : OutputRelay::kMaxForwarded) {}

  void take(std::string_view bytes) {
    pending_.append(bytes);
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      forward(std::string_view(pending_).substr(start, nl - start));
    }
    pending_.erase(0, start);
    if (pending_.size() >= kMaxLine) {  // no line feed yet: what there is goes now
      forward(pending_);
      pending_.clear();
    }
  }

  void end() {
    if (!pending_.empty()) forward(pending_);
    pending_.clear();
    if (dropped_ > 0) {
      write_fully(out_, std::string(kOutputPrefix) + "(" + std::to_string(dropped_) + " more bytes not shown)\n");
      dropped_ = 0;
    }
  }

 private:
  void forward(std::string_view line) {
    do {
      const std::string_view piece = line.substr(0, kMaxLine);
      line.remove_prefix(piece.size());
      if (forwarded_ >= budget_) {
        dropped_ += piece.size() + 1;
        continue;
      }
      forwarded_ += piece.size() + 1;
      // Escaping twice changes nothing, so a note the torch layer escaped
      // already prints as it wrote it.
      const bool note = notes_ && is_note(piece);
      write_fully(out_, (note ? std::string() : std::string(kOutputPrefix)) + escape_text(piece, TextEscape::Line) + "\n");
    } while (!line.empty());
  }

  int out_;
  bool notes_;
  size_t budget_;
  std::string pending_;
  size_t forwarded_ = 0, dropped_ = 0;
};

void close_all(std::initializer_list<int*> fds) {
  for (int* fd : fds) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

// close_range(2) where the kernel has it (5.9), else one close per number.
void close_range_of(unsigned first, unsigned last) noexcept {
  if (first > last) return;
#ifndef __NR_close_range
#define __NR_close_range 436  // Linux 5.9, the same on x86_64 and aarch64; headers may be older
#endif
  if (::syscall(__NR_close_range, first, last, 0) == 0) return;
  struct rlimit limit {};
  const rlim_t open_max = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY ? limit.rlim_cur : 65536;
  const unsigned end = static_cast<unsigned>(std::min<rlim_t>(open_max, 1u << 20));
  for (unsigned fd = first; fd <= last && fd < end; ++fd) ::close(static_cast<int>(fd));
}

}  // namespace

struct OutputRelay::State {
  int output[2] = {-1, -1};  // read, write: the child's fds 1 and 2
  int notes[2] = {-1, -1};   // read, write: libtorch's notes
  int stop_fd = -1;          // an eventfd: finish() asks the thread to drain the pipes and end
  std::thread reader;

  void read_all(int out) {
    LineForwarder forwarders[2] = {LineForwarder(out, false), LineForwarder(out, true)};
    const int fds[2] = {output[0], notes[0]};
    bool open[2] = {true, true};
    bool stopping = false;
    size_t drained = 0;  // once stopping: what is left, not whatever keeps coming
    char buffer[4096];
    while (open[0] || open[1]) {
      if (!stopping) {
        pollfd p[3] = {{open[0] ? fds[0] : -1, POLLIN, 0}, {open[1] ? fds[1] : -1, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        if (::poll(p, 3, -1) < 0 && errno != EINTR) break;
        stopping = (p[2].revents & POLLIN) != 0;
      }
      bool read_any = false;
      for (int i = 0; i < 2; ++i) {
        if (!open[i]) continue;
        const ssize_t n = ::read(fds[i], buffer, sizeof buffer);
        if (n > 0) {
          forwarders[i].take(std::string_view(buffer, static_cast<size_t>(n)));
          read_any = true;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          open[i] = false;  // the end of the pipe
        }
      }
      if (stopping && (!read_any || (drained += sizeof buffer) > 2 * kMaxForwarded)) break;  // what the child left
    }
    forwarders[0].end();
    forwarders[1].end();
  }
};

OutputRelay::OutputRelay() : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (::pipe2(s.output, O_CLOEXEC) != 0 || ::pipe2(s.notes, O_CLOEXEC) != 0 ||
      (s.stop_fd = ::eventfd(0, EFD_CLOEXEC)) < 0 || ::fcntl(s.output[0], F_SETFL, O_NONBLOCK) != 0 ||
      ::fcntl(s.notes[0], F_SETFL, O_NONBLOCK) != 0) {
    const std::string why = errno_text();
    close_all({&s.output[0], &s.output[1], &s.notes[0], &s.notes[1], &s.stop_fd});
    throw Error(ErrorKind::Torch, "cannot start the libtorch worker: " + why, {},
                "check the process and file limits (ulimit -u, ulimit -n)");
  }
}

OutputRelay::~OutputRelay() {
  finish();
  State& s = *state_;
  close_all({&s.output[0], &s.output[1], &s.notes[0], &s.notes[1], &s.stop_fd});
}

int OutputRelay::attach_child(bool across_exec) const noexcept {
  const State& s = *state_;
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, STDIN_FILENO) < 0) return -1;
  if (null != STDIN_FILENO) ::close(null);
  if (::dup2(s.output[1], STDOUT_FILENO) < 0 || ::dup2(s.output[1], STDERR_FILENO) < 0) return -1;
  if (across_exec && ::fcntl(s.notes[1], F_SETFD, 0) != 0) return -1;
  return s.notes[1];
}

int OutputRelay::child_notes_descriptor() const { return state_->notes[1]; }

void OutputRelay::start(int stderr_fd) {
  State& s = *state_;
  close_all({&s.output[1], &s.notes[1]});
  s.reader = std::thread([&s, stderr_fd] { s.read_all(stderr_fd); });
}

void OutputRelay::finish() {
  State& s = *state_;
  if (!s.reader.joinable()) return;
  const uint64_t one = 1;
  if (::write(s.stop_fd, &one, sizeof one) < 0) {
    // An eventfd write fails only on overflow: the thread is asked already.
  }
  s.reader.join();
}

void use_notes_descriptor(int notes_fd) {
  static FdBuffer cerr_buffer(-1);  // never destroyed before the worker's _exit
  std::cerr.flush();
  cerr_buffer = FdBuffer(notes_fd);
  std::cerr.rdbuf(&cerr_buffer);
  ::setenv(kWorkerNotesFdVariable, std::to_string(notes_fd).c_str(), 1);  // before any thread
}

void close_inherited_descriptors(const int* keep, size_t count) noexcept {
  int kept[8];
  size_t n = 0;
  for (size_t i = 0; i < count && n < 8; ++i) {
    if (keep[i] >= 3) kept[n++] = keep[i];
  }
  std::sort(kept, kept + n);
  unsigned next = 3;
  for (size_t i = 0; i < n; ++i) {
    const auto fd = static_cast<unsigned>(kept[i]);
    if (fd > next) close_range_of(next, fd - 1);
    next = std::max(next, fd + 1);
  }
  close_range_of(next, ~0u);
}

bool reopen_own_description(int fd) noexcept {
  if (fd < 0) return false;
  char path[40];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  const int fresh = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fresh < 0) return false;
  const bool replaced = ::dup3(fresh, fd, O_CLOEXEC) == fd;
  ::close(fresh);
  return replaced;
}

}  // namespace tsarchive
