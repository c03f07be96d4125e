// Native code as a hostile file would bring it (an AOTInductor package's
// library): loaded with --load-library, it runs in the worker, inside the
// sandbox, and tries to take more than the worker's budgets. What it does is
// chosen by TSARCHIVE_TEST_HOSTILE (the worker keeps TSARCHIVE_* variables):
//   disk         at load, writes 4 MiB files into $TMPDIR until stopped
//   disk-later   the same on a thread of its own, starting a second after load
//                (a served model that loads, answers, then writes between requests)
//   memory-later a thread that touches 1 MiB more every 2 ms, a second after load
// Used by tests/pytorch/check_worker_budgets.py.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

void write_until_stopped() {
  static char block[1 << 20];
  std::memset(block, 1, sizeof block);
  const char* tmp = std::getenv("TMPDIR");
  const std::string folder = tmp != nullptr ? tmp : "/tmp";
  for (int i = 0;; ++i) {
    const std::string name = folder + "/hostile-" + std::to_string(::getpid()) + "-" + std::to_string(i);
    const int fd = ::open(name.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return;
    for (int mib = 0; mib < 4; ++mib) {
      if (::write(fd, block, sizeof block) != static_cast<ssize_t>(sizeof block)) break;
      ::usleep(2000);
    }
    ::close(fd);
  }
}

void allocate_until_stopped() {
  for (;;) {
    char* block = static_cast<char*>(std::malloc(1 << 20));
    if (block == nullptr) return;
    std::memset(block, 1, 1 << 20);
    ::usleep(2000);
  }
}

__attribute__((constructor)) void misbehave() {
  const char* what = std::getenv("TSARCHIVE_TEST_HOSTILE");
  if (what == nullptr) return;
  const std::string mode = what;
  if (mode == "disk") write_until_stopped();
  const auto later = [](void (*work)()) {
    std::thread([work] {
      ::sleep(1);
      work();
    }).detach();
  };
  if (mode == "disk-later") later(write_until_stopped);
  if (mode == "memory-later") later(allocate_until_stopped);
}

}  // namespace
