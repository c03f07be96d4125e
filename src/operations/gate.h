// The gate as operations use it: an opened archive becomes a CheckedArchive
// (core/provenance/checked_archive.h), the only thing a worker job is made from
// (worker_settings.h).
#pragma once

#include <string>

#include "core/provenance/checked_archive.h"
#include "operations/notes.h"
#include "operations/opened_archive.h"
#include "operations/worker_settings.h"

namespace tsarchive {

// check_for_libtorch() on the opened archive; with --no-validate the
// archive goes unchecked, and a note says so. `consequence` says what did
// not happen ("nothing was run").
CheckedArchive pass_gate(const OpenedArchive& opened, const WorkerSettings& settings, const std::string& consequence,
                         const NoteSink& notes);

}  // namespace tsarchive
