// The gate as commands use it: an opened archive becomes a CheckedArchive
// (core/checked_archive.h), the only thing a worker job is made from
// (worker_options.h).
#pragma once

#include <iosfwd>
#include <string>

#include "cli/opened_archive.h"
#include "cli/worker_options.h"
#include "core/checked_archive.h"

namespace tsarchive::cli {

// check_for_libtorch() on the opened archive; with --no-validate the
// archive goes unchecked, and a note on `err` says so. `consequence` says
// what did not happen ("nothing was run").
CheckedArchive pass_gate(const OpenedArchive& opened, const WorkerOptions& options, const std::string& consequence,
                         std::ostream& err);

}  // namespace tsarchive::cli
