#include <fcntl.h>
#include <cstdlib>
#include <cstring>
#include <iostream>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli/cli.h"

namespace {

// A command other than `serve` (and its `__model-worker`s) is one short
// process. glibc hands a freed block of 128 KiB or more back to the kernel,
// and the next such allocation is faulted in again page by page, at about a
// microsecond for each 4 KiB here: inspect of a 2,000-tensor archive freed and
// re-faulted ~900 KiB that way (a pickle's graph, then the report's tables).
// Keeping freed memory for reuse until exit costs nothing in a short process;
// a server keeps glibc's defaults, which give memory back.
void keep_freed_memory_for_reuse(int argc, char** argv) {
#ifdef __GLIBC__
  if (argc >= 2 && (std::strcmp(argv[1], "serve") == 0 || std::strcmp(argv[1], "__model-worker") == 0)) return;
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#else
  (void)argc;
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // A closed standard descriptor would be the next file opened (the archive),
  // which the worker's own fds 0-2 then replace: /dev/null stands in for it.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return 4;
  }
  // libzip converts each entry's DOS time with mktime(); with TZ unset, glibc
  // stats /etc/localtime on every call (265 stats for a 265-record archive).
  // Naming the same file once keeps local time identical and stops that.
  setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
  keep_freed_memory_for_reuse(argc, argv);
  return tsarchive::cli::run(argc, argv, std::cout, std::cerr);
}
