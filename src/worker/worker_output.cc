#include "worker/worker_output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <thread>

#include "base/posix_fd.h"
#include "base/terminal_text.h"
#include "contract/torch_backend.h"

namespace tsarchive {
namespace {

constexpr size_t kMaxLine = 4096;  // a longer line is forwarded in pieces

// std::cerr's buffer in the worker: straight to the real stderr.
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

}  // namespace

struct WorkerOutput::State {
  int stderr_fd = -1;  // the real stderr
  int read_fd = -1;  // non-blocking
  int stop_fd = -1;  // an eventfd: finish() asks the thread to drain the pipe and end
  FdBuffer cerr_buffer{-1};
  std::streambuf* old_cerr = nullptr;
  std::thread reader;
  bool finished = false;

  void forward_line(std::string_view line, size_t& forwarded, size_t& dropped) const {
    do {
      const std::string_view piece = line.substr(0, kMaxLine);
      line.remove_prefix(piece.size());
      if (forwarded >= kMaxForwarded) {
        dropped += piece.size() + 1;
        continue;
      }
      forwarded += piece.size() + 1;
      write_fully(stderr_fd, "tsarchive: model output: " + escape_text(piece, TextEscape::Line) + "\n");
    } while (!line.empty());
  }

  // Until finish(): what is in the pipe then is forwarded, and nothing after
  // (native code that kept a copy of fd 1 would otherwise hold the pipe open).
  void read_all() const {
    std::string pending;
    size_t forwarded = 0, dropped = 0;
    char buffer[4096];
    bool stopping = false;
    while (true) {
      if (!stopping) {
        pollfd p[2] = {{read_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
        stopping = (p[1].revents & POLLIN) != 0;
      }
      const ssize_t n = ::read(read_fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0 && errno == EAGAIN && !stopping) continue;
        break;  // the end of the pipe, or nothing left to drain
      }
      pending.append(buffer, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        forward_line(std::string_view(pending).substr(start, nl - start), forwarded, dropped);
      }
      pending.erase(0, start);
      if (pending.size() >= kMaxLine) {  // no line feed yet: what there is goes now
        forward_line(pending, forwarded, dropped);
        pending.clear();
      }
    }
    if (!pending.empty()) forward_line(pending, forwarded, dropped);
    if (dropped > 0) {
      write_fully(stderr_fd, "tsarchive: model output: (" + std::to_string(dropped) + " more bytes not shown)\n");
    }
  }
};

WorkerOutput::WorkerOutput() : state_(std::make_unique<State>()) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  state_->stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (state_->stop_fd < 0 || ::fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
    for (int fd : {fds[0], fds[1], state_->stop_fd}) {
      if (fd >= 0) ::close(fd);
    }
    state_->stop_fd = -1;
    return;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  State& s = *state_;
  s.stderr_fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (s.stderr_fd < 0 || ::dup2(fds[1], STDOUT_FILENO) < 0 || ::dup2(fds[1], STDERR_FILENO) < 0) {
    for (int fd : {fds[0], fds[1], s.stop_fd}) ::close(fd);
    s.stop_fd = -1;
    if (s.stderr_fd >= 0) ::dup2(s.stderr_fd, STDERR_FILENO);
    return;
  }
  ::close(fds[1]);
  ::setenv(kWorkerNotesFdVariable, std::to_string(s.stderr_fd).c_str(), 1);  // before any thread
  s.read_fd = fds[0];
  s.cerr_buffer = FdBuffer(s.stderr_fd);
  s.old_cerr = std::cerr.rdbuf(&s.cerr_buffer);
  s.reader = std::thread([&s] { s.read_all(); });
}

void WorkerOutput::finish() {
  State& s = *state_;
  if (s.finished || !s.reader.joinable()) return;
  s.finished = true;
  std::cout.flush();
  std::fflush(nullptr);
  // Our write ends of the pipe go; the thread drains what was written and stops.
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ::dup2(null >= 0 ? null : s.stderr_fd, STDOUT_FILENO);
  ::dup2(s.stderr_fd, STDERR_FILENO);
  if (null >= 0) ::close(null);
  const uint64_t one = 1;
  if (::write(s.stop_fd, &one, sizeof one) < 0) {
    // An eventfd write fails only on overflow: the thread is asked already.
  }
  s.reader.join();
  std::cerr.rdbuf(s.old_cerr);
  ::close(s.read_fd);
  ::close(s.stop_fd);
}

WorkerOutput::~WorkerOutput() { finish(); }

}  // namespace tsarchive
