#include "base/file_state.h"

#include <time.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/posix_fd.h"

namespace tsarchive {
namespace {

// Longer than any kernel's timestamp tick (jiffies: 1 to 10 ms).
constexpr int64_t kTickNs = 20'000'000;

int64_t ns_since_epoch(int64_t s, int64_t ns) { return s * 1'000'000'000 + ns; }

}  // namespace

bool current_file_state(int fd, FileState& out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  out = FileState::of(st);
  return true;
}

FileState settled_file_state(int fd, const std::string& path, struct stat* st) {
  for (int waited = 0;; ++waited) {
    struct stat now_st {};
    if (::fstat(fd, &now_st) != 0) throw_io("cannot read the file's state: " + errno_text(), path);
    const FileState state = FileState::of(now_st);
    if (st != nullptr) *st = now_st;
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const int64_t age = ns_since_epoch(now.tv_sec, now.tv_nsec) - ns_since_epoch(state.ctime_s, state.ctime_ns);
    // A ctime in the future (a clock set back, a remote file system) is
    // no tick a later local write could share.
    if (age > kTickNs || age < -kTickNs || waited == 25) return state;
    std::this_thread::sleep_for(std::chrono::nanoseconds(kTickNs));
  }
}

}  // namespace tsarchive
