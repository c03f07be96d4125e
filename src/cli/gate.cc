#include "cli/gate.h"

#include <ostream>

#include "cli/output.h"

namespace tsarchive::cli {

CheckedArchive pass_gate(const OpenedArchive& opened, const WorkerOptions& options, const std::string& consequence,
                         std::ostream& err) {
  if (!options.no_validate) return check_for_libtorch(opened.file(), opened.archive(), consequence);
  print_note(err, "--no-validate: libtorch reads " + opened.file().path() +
                      " unchecked (in its worker, within --memory-limit and --time-limit)");
  return admit_unchecked(opened.file(), opened.archive());
}

}  // namespace tsarchive::cli
