#include "base/file_state.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/posix_fd.h"

namespace tsarchive {
namespace {

// Longer than any kernel's timestamp tick (jiffies: 1 to 10 ms).
constexpr int64_t kTickNs = 20'000'000;
// A file system that keeps whole seconds (ext4 with 128-byte inodes, ext3,
// many network and FUSE file systems; FAT: two): its times have no
// nanoseconds, and a write within the same second or two leaves them as they
// were. (A fine-grained time on a whole second is 1 in 10^9.)
constexpr int64_t kCoarseTickNs = 2'100'000'000;

int64_t ns_since_epoch(int64_t s, int64_t ns) { return s * 1'000'000'000 + ns; }

}  // namespace

bool current_file_state(int fd, FileState& out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  out = FileState::of(st);
  return true;
}

int64_t settle_wait_ns(const FileState& state, int64_t now_ns) {
  const int64_t tick = state.ctime_ns == 0 && state.mtime_ns == 0 ? kCoarseTickNs : kTickNs;
  const int64_t age = now_ns - ns_since_epoch(state.ctime_s, state.ctime_ns);
  // A ctime in the future (a clock set back, a remote file system) is no
  // tick a later local write could share.
  if (age > tick || age < -tick) return 0;
  return tick - age + 1'000'000;
}

FileState settled_file_state(int fd, const std::string& path, ErrorKind if_written, struct stat* st) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
  while (true) {
    struct stat now_st {};
    if (::fstat(fd, &now_st) != 0) throw_io("cannot read the file's state: " + errno_text(), path);
    const FileState state = FileState::of(now_st);
    if (st != nullptr) *st = now_st;
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    // Files written together wait once: by the second, the first one's wait
    // has passed their tick too.
    const int64_t wait = settle_wait_ns(state, ns_since_epoch(now.tv_sec, now.tv_nsec));
    if (wait == 0) return state;
    if (std::chrono::steady_clock::now() >= give_up) {
      throw Error(if_written, "it is being written: its ctime kept changing for 3 s", path,
                  "run again when nothing writes it");
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(wait, 100'000'000)));
  }
}

}  // namespace tsarchive
