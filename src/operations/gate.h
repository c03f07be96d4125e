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

// check_for_libtorch() on the opened archive, then refuse_unsafe_load();
// with --no-validate the archive goes unchecked, and a note says so.
// `consequence` says what did not happen ("nothing was run").
CheckedArchive pass_gate(const OpenedArchive& opened, const WorkerSettings& settings, const std::string& consequence,
                         const NoteSink& notes);

// Error(UnsafeToLoad), exit 8, when the load-safety verdict finds something
// dangerous or crafted (what verify exits 8 for), unless --allow-unsafe-load:
// the sandbox limits what a model's code can do, not what it is. Names the
// allowlist does not know (a custom operator's, an AOTInductor package's
// library) are left to the sandbox and --load-library.
void refuse_unsafe_load(const TorchArchive& archive, const std::string& file, const WorkerSettings& settings,
                        const std::string& consequence);
// The verdict's worst finding as refuse_unsafe_load() would name it
// ("crafted: WHERE WHAT"), or "" when it would let `archive` load.
std::string unsafe_load_finding(const TorchArchive& archive, const WorkerSettings& settings);

}  // namespace tsarchive
