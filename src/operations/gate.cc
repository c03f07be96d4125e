#include "operations/gate.h"

#include "base/error.h"
#include "core/inspect/load_safety.h"

namespace tsarchive {

std::string unsafe_load_finding(const TorchArchive& archive, const WorkerSettings& settings) {
  if (settings.allow_unsafe_load) return {};
  LoadSafetyOptions options;
  options.operator_libraries = !settings.libraries.empty();
  const LoadSafety safety = assess_archive_load_safety(archive, options);
  if (safety.worst() < LoadRisk::Dangerous) return {};  // unlisted names: their libraries, native code; the sandbox
  return safety.worst_line();
}

void refuse_unsafe_load(const TorchArchive& archive, const std::string& file, const WorkerSettings& settings,
                        const std::string& consequence) {
  const std::string finding = unsafe_load_finding(archive, settings);
  if (finding.empty()) return;
  throw Error(ErrorKind::UnsafeToLoad, "unsafe to load: " + finding, file,
              consequence + "; 'tsarchive verify' lists what loading it would run; --allow-unsafe-load runs it "
                            "anyway, in the worker's sandbox");
}

CheckedArchive pass_gate(const OpenedArchive& opened, const WorkerSettings& settings, const std::string& consequence,
                         const NoteSink& notes) {
  if (!settings.no_validate) {
    CheckedArchive checked = check_for_libtorch(opened.file(), opened.archive(), consequence);
    refuse_unsafe_load(opened.archive(), opened.file().path(), settings, consequence);
    return checked;
  }
  notes("--no-validate: libtorch reads " + opened.file().path() +
        " unchecked (in its worker, within --memory-limit and --time-limit)");
  return admit_unchecked(opened.file(), opened.archive());
}

}  // namespace tsarchive
