// The options of every command that hands an archive to libtorch's worker
// (worker/worker.h): its limits, --no-validate and --load-library, as flags
// and as the job they make.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/checked_archive.h"
#include "worker/worker.h"

namespace CLI {
class App;
}

namespace tsarchive::cli {

struct WorkerOptions {
  std::string memory_limit = "auto";  // SIZE (512M, 8G, 1.5GiB, bytes), "auto" or "none"
  double time_limit_s = 600;          // 0: none
  bool no_validate = false;
  std::vector<std::string> libraries;  // --load-library
};

// Adds --memory-limit and --time-limit, and --no-validate when
// `validate_flag`; `when` prefixes their help ("With --load: ").
void add_worker_options(CLI::App& app, WorkerOptions& options, bool validate_flag, const std::string& when = {});

// The limits for an archive of `archive_size` bytes. "auto" allows
// max(4 GiB, 2 GiB + 4 x the archive), at most 90% of the machine's memory.
// Error(Usage) for a SIZE that does not parse.
WorkerLimits resolve_worker_limits(const WorkerOptions& options, uint64_t archive_size);

// The job for `activity` on an archive that passed the gate (cli/gate.h), or
// that the user sent unchecked, under the options' limits. The first job of
// the process notes on `err` when the kernel offers the worker's sandbox only
// in part or not at all (sandbox.h).
WorkerJob worker_job(const WorkerOptions& options, const CheckedArchive& archive, std::string activity,
                     std::ostream& err);

// A job that reads no archive (the linked libtorch's version and devices).
WorkerJob worker_job_without_archive(std::string activity);

// "512M", "8G", "1.5GiB", "4096" (bytes); suffixes are powers of 1024.
// Error(Usage) naming `flag` otherwise.
uint64_t parse_memory_size(const std::string& text, const char* flag);

}  // namespace tsarchive::cli
