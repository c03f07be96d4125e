// What every operation that hands an archive to libtorch's worker
// (worker/worker.h) is told about that worker: its limits, --no-validate and
// --load-library; and the job they make. The CLI's flags for them are in
// cli/worker_options.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/inputs/input_values.h"
#include "core/provenance/checked_archive.h"
#include "operations/notes.h"
#include "worker/worker.h"

namespace tsarchive {

struct WorkerSettings {
  std::string memory_limit = "auto";  // SIZE (512M, 8G, 1.5GiB, bytes), "auto" or "none"
  double time_limit_s = 600;          // 0: none
  std::string disk_limit = "auto";    // SIZE, "auto" or "none" (worker/disk_use.h)
  bool no_validate = false;
  bool allow_unsafe_load = false;  // load what the load-safety verdict calls dangerous or crafted (gate.h)
  std::vector<std::string> libraries;  // --load-library
};

// The limits for an archive of `archive_size` bytes. "auto" allows
// max(4 GiB, 2 GiB + 4 x the archive) of memory, at most 90% of the
// machine's, and as much on disk. Error(Usage) for a SIZE that does not parse.
WorkerLimits resolve_worker_limits(const WorkerSettings& settings, uint64_t archive_size);

// What the tensors of run's, trace's and convert's input files (--input, --expect) may
// take in memory, all together (core/inputs/input_values.h: InputBudget):
// half of the worker's --memory-limit, which holds them whole beside libtorch
// and the model. "auto" counts as its 4 GiB floor, at most 90% of RAM (the
// inputs are read before the archive, which can only raise it); "none" as the
// machine's memory, since tsarchive itself holds them too. Error(Usage) for a
// SIZE that does not parse. For what is not input files: `hint`, what to do
// past it (", or raise --memory-limit" is added), and `held`, what it is.
InputBudget input_budget(const WorkerSettings& settings, const std::string& hint = {},
                         const std::string& held = "inputs");

// The job for `activity` on an archive that passed the gate (gate.h), or
// that the user sent unchecked, under the settings' limits. The first job of
// the process notes when the kernel offers the worker's sandbox only in part
// or not at all (sandbox.h).
WorkerJob worker_job(const WorkerSettings& settings, const CheckedArchive& archive, std::string activity,
                     const NoteSink& notes);

// A job that reads no archive (the linked libtorch's version and devices).
WorkerJob worker_job_without_archive(std::string activity);

// "512M", "8G", "1.5GiB", "4096" (bytes); suffixes are powers of 1024.
// Error(Usage) naming `flag` otherwise.
uint64_t parse_memory_size(const std::string& text, const char* flag);

}  // namespace tsarchive
