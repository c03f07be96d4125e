// libzip, bound at run time (base/runtime_library.h).
//
// The binary does not link libzip: a ZipArchive starts loading it on a thread
// of its own while it reads the central directory (the loader's work, libzip
// and the libcrypto it links, is about 1.1 ms), and the first cross_check()
// waits for it; commands that open no archive (--version, help, a usage
// error) never load it.
#pragma once

#include <zip.h>

namespace tsarchive {

// The libzip functions ZipArchive calls.
struct LibZip {
  decltype(&::zip_error_init) error_init;
  decltype(&::zip_error_fini) error_fini;
  decltype(&::zip_error_set) error_set;
  decltype(&::zip_error_strerror) error_strerror;
  decltype(&::zip_error_to_data) error_to_data;
  decltype(&::zip_source_function_create) source_function_create;
  decltype(&::zip_source_free) source_free;
  decltype(&::zip_source_seek_compute_offset) source_seek_compute_offset;
  decltype(&::zip_source_make_command_bitmap) source_make_command_bitmap;
  decltype(&::zip_open_from_source) open_from_source;
  decltype(&::zip_discard) discard;
  decltype(&::zip_get_num_entries) get_num_entries;
  decltype(&::zip_get_archive_comment) get_archive_comment;
  decltype(&::zip_stat_init) stat_init;
  decltype(&::zip_stat_index) stat_index;
};

// libzip, loaded on the first call (thread-safe; later calls return at once).
// Throws Error(Io) naming the library when it cannot be loaded or lacks one of
// the functions.
const LibZip& libzip();

// Starts loading libzip on another thread, once per process; libzip() waits
// for it. Before any fork() the process waits for it too (a pthread_atfork
// handler), so that no child starts with the dynamic loader's lock held by a
// thread it does not have. Where no thread can be started, libzip() loads it.
void start_loading_libzip();

}  // namespace tsarchive
