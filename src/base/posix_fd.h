// Small POSIX helpers the core shares: an owning file descriptor, errno as text.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace tsarchive {

// Owns one descriptor; closes it when destroyed. -1 is "none".
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Hands the descriptor over: this object no longer closes it.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

inline std::string errno_text() { return std::strerror(errno); }

// Writes all of `bytes` to `fd`, again after EINTR and short writes; false
// when the other end is gone or the write fails (nothing to be done about it
// for a pipe to a parent or a terminal).
inline bool write_fully(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Whether `path` names anything (following symbolic links).
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Whether `path` names a directory (following symbolic links); false when it cannot be stat'ed.
inline bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace tsarchive
