#include "operations/gate.h"

namespace tsarchive {

CheckedArchive pass_gate(const OpenedArchive& opened, const WorkerSettings& settings, const std::string& consequence,
                         const NoteSink& notes) {
  if (!settings.no_validate) return check_for_libtorch(opened.file(), opened.archive(), consequence);
  notes("--no-validate: libtorch reads " + opened.file().path() +
        " unchecked (in its worker, within --memory-limit and --time-limit)");
  return admit_unchecked(opened.file(), opened.archive());
}

}  // namespace tsarchive
