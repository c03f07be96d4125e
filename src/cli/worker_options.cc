#include "cli/worker_options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "cli/output.h"
#include "worker/sandbox.h"

namespace tsarchive::cli {
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

WorkerLimits resolve_worker_limits(const WorkerOptions& options, uint64_t archive_size) {
  WorkerLimits limits;
  limits.time_s = options.time_limit_s;
  if (options.memory_limit == "none") {
    limits.memory_bytes = 0;
  } else if (options.memory_limit == "auto") {
    limits.memory_bytes = std::max(4 * kGiB, 2 * kGiB + 4 * archive_size);
    const uint64_t ram = physical_memory_bytes();
    if (ram != 0) limits.memory_bytes = std::min(limits.memory_bytes, ram / 10 * 9);
  } else {
    limits.memory_bytes = parse_memory_size(options.memory_limit, "--memory-limit");
  }
  return limits;
}

namespace {

void note_worker_sandbox(std::ostream& err) {
  static bool noted = false;
  const std::string note = sandbox_note(sandbox_support());
  if (noted || note.empty() || worker_disabled()) return;
  noted = true;
  print_note(err, note);
}

}  // namespace

WorkerJob worker_job(const WorkerOptions& options, const CheckedArchive& archive, std::string activity,
                     std::ostream& err) {
  note_worker_sandbox(err);
  return WorkerJob{archive.file(), std::move(activity), resolve_worker_limits(options, archive.size()),
                   archive.checked(), options.libraries, {}};
}

WorkerJob worker_job_without_archive(std::string activity) {
  return WorkerJob{"", std::move(activity), resolve_worker_limits(WorkerOptions{}, 0), true, {}, {}};
}

void add_worker_options(CLI::App& app, WorkerOptions& options, bool validate_flag, const std::string& when) {
  const auto help = [&when](std::string text) {
    if (!when.empty()) text = when + static_cast<char>(std::tolower(static_cast<unsigned char>(text[0]))) + text.substr(1);
    return text;
  };
  app.add_option("--memory-limit", options.memory_limit,
                 help("Resident memory libtorch's worker may use (default auto: 4G, or 2G + 4x the\n"
                        "archive if more, at most 90% of RAM; none: no limit)"))
      ->type_name("SIZE");
  app.add_option("--time-limit", options.time_limit_s, help("Seconds libtorch's worker may run (default 600; 0: none)"))
      ->type_name("SECONDS")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--load-library", options.libraries,
                 help("Shared library of custom operators or classes to load before the model (repeatable)"))
      ->type_name("LIB");
  if (validate_flag) {
    app.add_flag("--no-validate", options.no_validate,
                 help("Hand the archive to libtorch without verify's checks (experts; still in the worker)"));
  }
}

}  // namespace tsarchive::cli
