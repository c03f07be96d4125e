// What says a file was written: its ctime, mtime and size, as fstat gives
// them. A write to the inode (in place, by any process, locked or not)
// changes its ctime, which no one but the kernel sets; so the same state
// before and after a read means the read saw one version of the file.
//
// The kernel stamps ctime from a coarse clock (a tick of a few ms): a write
// in the same tick as the last one leaves ctime as it was. A state taken
// while the file's ctime is that recent could miss a write made next, in
// the same tick; settled_file_state() waits until the tick is past.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "base/error.h"

namespace tsarchive {

struct FileState {
  int64_t ctime_s = 0, ctime_ns = 0, mtime_s = 0, mtime_ns = 0;
  uint64_t size = 0;

  static FileState of(const struct stat& st) {
    return FileState{static_cast<int64_t>(st.st_ctim.tv_sec), static_cast<int64_t>(st.st_ctim.tv_nsec),
                     static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec),
                     static_cast<uint64_t>(st.st_size)};
  }
  bool operator==(const FileState& o) const {
    return ctime_s == o.ctime_s && ctime_ns == o.ctime_ns && mtime_s == o.mtime_s && mtime_ns == o.mtime_ns &&
           size == o.size;
  }
  bool operator!=(const FileState& o) const { return !(*this == o); }
};

// The state of the file open at `fd` now; false when it cannot be stat'ed.
bool current_file_state(int fd, FileState& out);

// How long to wait, at `now_ns` (CLOCK_REALTIME), before `state` can be
// trusted: until its ctime is a tick old (below); 0 when it is.
int64_t settle_wait_ns(const FileState& state, int64_t now_ns);

// The state of the file open at `fd`, taken once its ctime is more than a
// clock tick in the past (20 ms; 2.1 s where the file system keeps whole
// seconds): a write after it always changes the state. Error(`if_written`)
// naming `path` when it is still being written after 3 s (no state taken
// then could be trusted); Error(Io) when it cannot be stat'ed. `st`, when
// given, gets the fstat the state is of.
FileState settled_file_state(int fd, const std::string& path, ErrorKind if_written, struct stat* st = nullptr);

}  // namespace tsarchive
