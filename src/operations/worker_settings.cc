#include "operations/worker_settings.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "base/strings.h"
#include "worker/sandbox.h"

namespace tsarchive {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

uint64_t parse_memory_size(const std::string& text, const char* flag) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();           // "GB" as "G"
  if (unit.size() == 2 && unit.back() == 'I') unit.pop_back();          // "GI" (from GiB) as "G"
  const std::string units = "KMGT";
  const size_t power = unit.empty() ? 0 : units.find(unit) == std::string::npos ? std::string::npos : units.find(unit) + 1;
  if (used == 0 || !(value > 0) || unit.size() > 1 || power == std::string::npos) {
    throw_usage(std::string(flag) + " " + text + " is not a size",
                "give bytes or a number with K, M, G or T (powers of 1024), e.g. 8G; or auto, or none");
  }
  const double bytes = value * static_cast<double>(uint64_t{1} << (10 * power));
  if (!(bytes >= 1 && bytes <= 1e18)) throw_usage(std::string(flag) + " " + text + " is out of range");
  return static_cast<uint64_t>(bytes);
}

WorkerLimits resolve_worker_limits(const WorkerSettings& settings, uint64_t archive_size) {
  WorkerLimits limits;
  limits.time_s = settings.time_limit_s;
  const uint64_t automatic = std::max(4 * kGiB, 2 * kGiB + 4 * archive_size);
  if (settings.memory_limit == "none") {
    limits.memory_bytes = 0;
  } else if (settings.memory_limit == "auto") {
    limits.memory_bytes = automatic;
    const uint64_t ram = physical_memory_bytes();
    if (ram != 0) limits.memory_bytes = std::min(limits.memory_bytes, ram / 10 * 9);
  } else {
    limits.memory_bytes = parse_memory_size(settings.memory_limit, "--memory-limit");
  }
  if (settings.disk_limit == "none") {
    limits.disk_bytes = 0;
  } else if (settings.disk_limit == "auto") {
    limits.disk_bytes = automatic;
  } else {
    limits.disk_bytes = parse_memory_size(settings.disk_limit, "--disk-limit");
  }
  return limits;
}

InputBudget input_budget(const WorkerSettings& settings, const std::string& hint, const std::string& held) {
  const uint64_t limit = resolve_worker_limits(settings, 0).memory_bytes;
  const std::string inputs_hint = "inputs are held in memory whole; give smaller ones";
  if (limit == 0) {
    const uint64_t ram = physical_memory_bytes();
    return InputBudget(ram != 0 ? ram / 2 : kMaxInputFileBytes, "half of this machine's memory, with --memory-limit none",
                       hint.empty() ? inputs_hint : hint, held);
  }
  return InputBudget(limit / 2, "half of --memory-limit " + (settings.memory_limit == "auto" ? "auto, " : std::string()) +
                                    human_size(limit) + "; libtorch and the model need the rest",
                     (hint.empty() ? inputs_hint : hint) + ", or raise --memory-limit", held);
}

namespace {

void note_worker_sandbox(const NoteSink& notes) {
  static bool noted = false;
  const std::string note = sandbox_note(sandbox_support());
  if (noted || note.empty() || worker_disabled()) return;
  noted = true;
  notes(note);
}

}  // namespace

WorkerJob worker_job(const WorkerSettings& settings, const CheckedArchive& archive, std::string activity,
                     const NoteSink& notes) {
  note_worker_sandbox(notes);
  WorkerJob job;
  job.file = archive.file();
  job.activity = std::move(activity);
  job.limits = resolve_worker_limits(settings, archive.size());
  job.validated = archive.checked();
  job.libraries = settings.libraries;
  job.archive = archive.watched();
  return job;
}

WorkerJob worker_job_without_archive(std::string activity) {
  WorkerJob job;
  job.activity = std::move(activity);
  job.limits = resolve_worker_limits(WorkerSettings{}, 0);
  return job;
}

}  // namespace tsarchive
