#include "format/libzip.h"

#include <pthread.h>

#include <mutex>
#include <system_error>
#include <thread>

#include "base/runtime_library.h"

#ifndef TSARCHIVE_LIBZIP_SONAME
#error "the build names the libzip to load (CMakeLists.txt: TSARCHIVE_LIBZIP_SONAME)"
#endif

namespace tsarchive {
namespace {

LibZip load() {
  const RuntimeLibrary library(TSARCHIVE_LIBZIP_SONAME,
                               "install libzip (Debian and Ubuntu: apt-get install libzip4), or put it on LD_LIBRARY_PATH");
  LibZip z{};
  library.bind("zip_error_init", z.error_init);
  library.bind("zip_error_fini", z.error_fini);
  library.bind("zip_error_set", z.error_set);
  library.bind("zip_error_strerror", z.error_strerror);
  library.bind("zip_error_to_data", z.error_to_data);
  library.bind("zip_source_function_create", z.source_function_create);
  library.bind("zip_source_free", z.source_free);
  library.bind("zip_source_seek_compute_offset", z.source_seek_compute_offset);
  library.bind("zip_source_make_command_bitmap", z.source_make_command_bitmap);
  library.bind("zip_open_from_source", z.open_from_source);
  library.bind("zip_discard", z.discard);
  library.bind("zip_get_num_entries", z.get_num_entries);
  library.bind("zip_get_archive_comment", z.get_archive_comment);
  library.bind("zip_stat_init", z.stat_init);
  library.bind("zip_stat_index", z.stat_index);
  return z;
}

const LibZip& loaded() {
  // A failed load throws out of the initialiser, so the next call tries again.
  static const LibZip library = load();
  return library;
}

// The thread start_loading_libzip() starts; joined by the first wait(), and
// at the latest at exit.
struct Loader {
  std::mutex mutex;
  std::thread thread;
  bool started = false;
  ~Loader() { wait(); }
  void wait() {
    const std::lock_guard<std::mutex> lock(mutex);
    if (thread.joinable()) thread.join();
  }
};

Loader& loader() {
  static Loader instance;
  return instance;
}

}  // namespace

const LibZip& libzip() {
  loader().wait();
  return loaded();
}

void start_loading_libzip() {
  Loader& l = loader();
  const std::lock_guard<std::mutex> lock(l.mutex);
  if (l.started) return;
  l.started = true;
  ::pthread_atfork([] { loader().wait(); }, nullptr, nullptr);
  try {
    l.thread = std::thread([] {
      try {
        loaded();
      } catch (...) {  // libzip() loads it again and reports why it cannot
      }
    });
  } catch (const std::system_error&) {  // no thread: libzip() loads it
  }
}

}  // namespace tsarchive
