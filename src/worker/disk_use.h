// What a worker holds on disk, and its bound (--disk-limit).
//
// The sandbox (sandbox.h) lets a worker write only in its own folders: its
// temporary folder, the /tmp folder reserved for an AOTInductor package, and
// the staging folder of stamp, trace and convert. Landlock bounds where, not
// how much: native code from a file (an AOTInductor package's library) could
// fill the user's disk there, or run a machine out of inodes. So the parent
// measures, besides the worker's memory:
//   - every file and folder below the worker's folders (st_blocks, each inode
//     once; symbolic links are not followed), and their count;
//   - what the worker holds that no folder names: files it made in its
//     folders (or with memfd_create) and has open or mapped with no link
//     left (written, then unlinked; O_TMPFILE), from /proc/PID/fd and
//     /proc/PID/maps;
// and the worker itself runs under RLIMIT_FSIZE at the same limit, so no one
// file passes it between two looks (a write past it ends the worker with
// SIGXFSZ, which the parent reports as the limit). Between two looks (every
// 100 ms) a worker can still write what the disk takes in that time: the
// bound is the limit plus that, not the limit itself.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tsarchive {

// More files and folders than this in a worker's folders, or folders nested
// deeper than kMaxWorkerFolderDepth, is past the limit whatever their size:
// no job of libtorch's writes more than a few (an unpacked package, a trace,
// a staged archive), and the count bounds the time a look takes.
constexpr uint64_t kMaxWorkerEntries = 65536;
constexpr int kMaxWorkerFolderDepth = 64;

struct DiskUse {
  uint64_t bytes = 0;      // allocated on disk (or in tmpfs), each inode once
  // Of `bytes`, those in memory (memfds; files on tmpfs, such as a /tmp that
  // is one): --memory-limit counts them too, beside the worker's resident memory.
  uint64_t memory_bytes = 0;
  // Of `memory_bytes`, those the worker has mapped and resident, which its
  // RssShmem (worker.h: worker_usage) counts already: memory_bytes less
  // these is what --memory-limit adds, so nothing counts twice.
  uint64_t memory_mapped_bytes = 0;
  uint64_t entries = 0;    // files and folders below the folders
  bool too_deep = false;   // a folder nested past kMaxWorkerFolderDepth
};

// What the worker `pid` (0: none; the folders alone) holds in `folders` and
// in files no folder names. A folder that is gone counts nothing.
DiskUse measure_disk_use(pid_t pid, const std::vector<std::string>& folders);

// Why `use` passes `limit` bytes ("wrote 4.1 GiB, more than the disk limit
// (4.0 GiB, --disk-limit)"), or "" when it does not. `limit` 0: only the
// count and depth bounds apply.
std::string disk_limit_passed(const DiskUse& use, uint64_t limit);

// In the worker (async-signal-safe): RLIMIT_FSIZE at most `disk_limit`
// bytes (0: as it is), and RLIMIT_NOFILE at most kMaxWorkerDescriptors, which
// bounds the descriptors a look at /proc/PID/fd reads.
constexpr uint64_t kMaxWorkerDescriptors = 65536;
void limit_worker_files(uint64_t disk_limit);

}  // namespace tsarchive
