// What a worker holds on disk (worker/disk_use.h): measured in its folders
// and in the files it hid from them, and bounded by --disk-limit. The
// workers here are plain functions doing what native code from a file could.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "helpers.h"
#include "operations/worker_settings.h"
#include "worker/disk_use.h"
#include "worker/sandbox.h"
#include "worker/worker.h"

using namespace tsarchive;

namespace {

constexpr uint64_t kDiskMiB = uint64_t{1} << 20;

// `staging`: a folder the job may write besides its own (stamp's, trace's).
WorkerJob disk_job(uint64_t disk_bytes, std::vector<std::string> staging = {}) {
  WorkerJob job;
  job.file = "model.pt";
  job.activity = "running forward";
  job.limits = WorkerLimits{0, 30, disk_bytes};
  job.writable = std::move(staging);
  return job;
}

// Writes `bytes` of ones to the open `fd`, 1 MiB at a time, slowly enough for
// the parent's looks every 100 ms to see it pass a limit of tens of MiB.
bool fill_ones(int fd, uint64_t bytes) {
  static const std::string block(kDiskMiB, '\1');
  for (uint64_t done = 0; done < bytes; done += kDiskMiB) {
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) return false;
    ::usleep(2000);
  }
  return true;
}

// In the worker: its own folder, which exists only with the sandbox
// (sandbox.h; the tests that write there check worker_has_folder first).
std::string worker_tmpdir() { return std::getenv("TMPDIR"); }
bool worker_has_folder() { return !sandbox_support().disabled; }

}  // namespace

TEST_CASE("disk use: a folder's files by their blocks, each inode once, links not followed", "[worker]") {
  TempDir dir, elsewhere;
  {
    const int fd = ::open(dir.file("a").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fill_ones(fd, 3 * kDiskMiB));
    ::close(fd);
  }
  REQUIRE(::mkdir(dir.file("sub").c_str(), 0700) == 0);
  REQUIRE(::link(dir.file("a").c_str(), (dir.file("sub") + "/b").c_str()) == 0);  // the same 3 MiB
  {
    const int fd = ::open(elsewhere.file("big").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    REQUIRE(fill_ones(fd, 8 * kDiskMiB));
    ::close(fd);
  }
  REQUIRE(::symlink(elsewhere.file("big").c_str(), dir.file("link").c_str()) == 0);

  const DiskUse use = measure_disk_use(0, {dir.path.string()});
  CHECK(use.entries == 4);  // a, sub, sub/b, link
  CHECK(use.bytes >= 3 * kDiskMiB);
  CHECK(use.bytes < 4 * kDiskMiB);  // neither the hard link again nor what the link points at
  CHECK(disk_limit_passed(use, 16 * kDiskMiB).empty());
  CHECK_THAT(disk_limit_passed(use, kDiskMiB), Catch::Contains("more than the disk limit (1.00 MiB, --disk-limit)"));
  CHECK(measure_disk_use(0, {dir.file("gone")}).bytes == 0);
}

TEST_CASE("disk use: too many entries, or folders too deep, pass the limit whatever their size", "[worker]") {
  TempDir deep;
  std::string path = deep.path.string();
  for (int i = 0; i <= kMaxWorkerFolderDepth; ++i) {
    path += "/d";
    REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  }
  const DiskUse nested = measure_disk_use(0, {deep.path.string()});
  CHECK(nested.too_deep);
  CHECK_THAT(disk_limit_passed(nested, 0), Catch::Contains("nested folders more than 64 deep"));

  TempDir many;
  for (uint64_t i = 0; i <= kMaxWorkerEntries; ++i) {
    REQUIRE(::close(::open(many.file(std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0);
  }
  const DiskUse crowded = measure_disk_use(0, {many.path.string()});
  CHECK(crowded.entries > kMaxWorkerEntries);
  CHECK_THAT(disk_limit_passed(crowded, 0), Catch::Contains("more than 65536 files and folders"));
}

TEST_CASE("the disk limit: auto, none and sizes", "[worker]") {
  WorkerSettings settings;
  CHECK(resolve_worker_limits(settings, 0).disk_bytes == 4 * 1024 * kDiskMiB);
  CHECK(resolve_worker_limits(settings, 1024 * kDiskMiB).disk_bytes == 6 * 1024 * kDiskMiB);
  settings.disk_limit = "none";
  CHECK(resolve_worker_limits(settings, 0).disk_bytes == 0);
  settings.disk_limit = "200M";
  CHECK(resolve_worker_limits(settings, 0).disk_bytes == 200 * kDiskMiB);
  settings.disk_limit = "lots";
  CHECK(error_of([&] { resolve_worker_limits(settings, 0); }).kind() == ErrorKind::Usage);
}

TEST_CASE("a worker that writes one file past --disk-limit ends there", "[worker]") {
  TempDir staging;
  const Error e = error_of([&] {
    run_in_worker(disk_job(16 * kDiskMiB, {staging.path.string()}), [&]() -> std::string {
      // RLIMIT_FSIZE: the write past 16 MiB ends the worker (SIGXFSZ), wherever
      // the file is, the sandbox on or off.
      const int fd = ::open(staging.file("one").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      fill_ones(fd, 64 * kDiskMiB);
      return "finished";
    });
  });
  CHECK(e.kind() == ErrorKind::Torch);
  CHECK_THAT(e.what(), Catch::Contains("wrote a file past the disk limit (16.0 MiB, --disk-limit)"));
  CHECK_THAT(e.hint(), Catch::Contains("raise --disk-limit"));
}

TEST_CASE("a worker whose files together pass --disk-limit is stopped", "[worker]") {
  if (!worker_has_folder()) return;
  std::string folder;
  const Error e = error_of([] {
    run_in_worker(disk_job(32 * kDiskMiB), []() -> std::string {
      for (int i = 0; i < 64; ++i) {  // 4 MiB each, 256 MiB in all
        const int fd = ::open((worker_tmpdir() + "/part" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        fill_ones(fd, 4 * kDiskMiB);
        ::close(fd);
      }
      return "finished";
    });
  });
  CHECK(e.kind() == ErrorKind::Torch);
  CHECK_THAT(e.what(), Catch::Contains("more than the disk limit (32.0 MiB, --disk-limit)") &&
                           Catch::Contains("while running forward and was stopped"));
}

TEST_CASE("a worker cannot hide what it writes from --disk-limit by unlinking it, in memfds or mappings", "[worker]") {
  if (!worker_has_folder()) return;
  SECTION("written, then unlinked while open") {
    const Error e = error_of([] {
      run_in_worker(disk_job(32 * kDiskMiB), []() -> std::string {
        std::vector<int> kept;
        for (int i = 0; i < 64; ++i) {
          const std::string name = worker_tmpdir() + "/hidden" + std::to_string(i);
          const int fd = ::open(name.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
          ::unlink(name.c_str());
          fill_ones(fd, 4 * kDiskMiB);
          kept.push_back(fd);
        }
        return "finished";
      });
    });
    CHECK_THAT(e.what(), Catch::Contains("more than the disk limit (32.0 MiB"));
  }
  SECTION("memfd_create") {
    const Error e = error_of([] {
      run_in_worker(disk_job(32 * kDiskMiB), []() -> std::string {
        std::vector<int> kept;
        for (int i = 0; i < 64; ++i) {
          const int fd = ::memfd_create("payload", MFD_CLOEXEC);
          if (fd < 0) return "no memfd";
          fill_ones(fd, 4 * kDiskMiB);
          kept.push_back(fd);
        }
        return "finished";
      });
    });
    CHECK_THAT(e.what(), Catch::Contains("more than the disk limit (32.0 MiB"));
  }
  SECTION("mapped, closed and unlinked") {
    const Error e = error_of([] {
      run_in_worker(disk_job(32 * kDiskMiB), []() -> std::string {
        for (int i = 0; i < 64; ++i) {
          const std::string name = worker_tmpdir() + "/mapped" + std::to_string(i);
          const int fd = ::open(name.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
          fill_ones(fd, 4 * kDiskMiB);
          if (::mmap(nullptr, 4 * kDiskMiB, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED) return "no mapping";
          ::close(fd);
          ::unlink(name.c_str());
        }
        return "finished";
      });
    });
    CHECK_THAT(e.what(), Catch::Contains("more than the disk limit (32.0 MiB"));
  }
}

TEST_CASE("a memfd is memory: written and never mapped, it counts against --memory-limit", "[worker]") {
  if (!worker_has_folder()) return;
  WorkerJob job = disk_job(0);
  job.limits.memory_bytes = 256 * kDiskMiB;  // above what the test binary's worker holds itself
  const Error e = error_of([&] {
    run_in_worker(job, []() -> std::string {
      const int fd = ::memfd_create("payload", MFD_CLOEXEC);
      if (fd < 0) return "no memfd";
      fill_ones(fd, 1024 * kDiskMiB);
      return "finished";
    });
  });
  CHECK_THAT(e.what(), Catch::Contains("memory limit (256 MiB resident, --memory-limit)"));
}

TEST_CASE("a memfd mapped and touched counts once against --memory-limit, not as file and as mapping", "[worker]") {
  if (!worker_has_folder()) return;
  WorkerJob job = disk_job(0);
  // The worker starts with what this process holds (a fork's pages count as
  // its own; a sanitizer's quarantine and a long test run make that hundreds
  // of MiB): 320 MiB counted once fits in 480 MiB more, counted twice it does not.
  job.limits.memory_bytes = worker_usage(::getpid()).resident_bytes + 480 * kDiskMiB;
  CHECK(run_in_worker(job, []() -> std::string {
          const uint64_t size = 320 * kDiskMiB;
          const int fd = ::memfd_create("mapped", MFD_CLOEXEC);
          if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) return "no memfd";
          void* at = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (at == MAP_FAILED) return "no mapping";
          std::memset(at, 1, size);
          ::usleep(400 * 1000);  // several looks of the parent's
          return "finished";
        }) == "finished");
}

TEST_CASE("disk use: the part of a file in memory that the worker has mapped and resident", "[worker]") {
  // The test process stands for the worker: /dev/shm is a tmpfs where there is one.
  char folder[] = "/dev/shm/tsarchive-test-XXXXXX";
  if (::mkdtemp(folder) == nullptr) return;
  const std::string file = std::string(folder) + "/weights";
  const uint64_t size = 4 * kDiskMiB;
  const int fd = ::open(file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(fill_ones(fd, size));
  DiskUse use = measure_disk_use(::getpid(), {folder});
  if (use.memory_bytes == 0) {  // /dev/shm not in memory here
    ::close(fd);
    ::unlink(file.c_str());
    ::rmdir(folder);
    return;
  }
  CHECK(use.memory_bytes >= size);
  CHECK(use.memory_mapped_bytes == 0);
  SECTION("mapped shared and read: its pages are the file's") {
    auto* at = static_cast<volatile char*>(::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
    REQUIRE(at != MAP_FAILED);
    for (uint64_t i = 0; i < size; i += 4096) (void)at[i];
    use = measure_disk_use(::getpid(), {folder});
    CHECK(use.memory_mapped_bytes == size);
    ::munmap(const_cast<char*>(at), size);
  }
  SECTION("mapped privately and written: the copies are its own memory, not the file's") {
    auto* at = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
    REQUIRE(at != MAP_FAILED);
    std::memset(at, 2, size);
    use = measure_disk_use(::getpid(), {folder});
    CHECK(use.memory_mapped_bytes == 0);
    ::munmap(at, size);
  }
  ::close(fd);
  ::unlink(file.c_str());
  ::rmdir(folder);
}

TEST_CASE("a worker within --disk-limit finishes", "[worker]") {
  TempDir staging;
  CHECK(run_in_worker(disk_job(64 * kDiskMiB, {staging.path.string()}), [&] {
          const int fd = ::open(staging.file("within").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
          const bool ok = fill_ones(fd, 8 * kDiskMiB);
          ::close(fd);
          return std::string(ok ? "finished" : "write failed");
        }) == "finished");
}
