// libzip, bound at run time (base/runtime_library.h).
//
// The binary does not link libzip: the first ZipArchive::cross_check() in the
// process loads it, so commands that read no archive (--version, help, a
// usage error) never do.
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

}  // namespace tsarchive
