// Options that run, trace and convert read the same way.
#pragma once

#include <string>
#include <vector>

#include "contract/run.h"
#include "core/edit/output_paths.h"
#include "core/inputs/run_check.h"
#include "format/archive.h"

namespace tsarchive::cli {

// --atol / --rtol values: "1e-4" sets the default tolerance, "out[1]=1e-2"
// one output's (paths as the reports name them). Error(Usage) for anything else.
void apply_tolerances(const std::vector<std::string>& values, const char* flag, RunRequest& request);

// The files that --input or --expect arguments (`specs`) read: @FILE,
// @FILE:OPTIONS and @A,B (pictures); each as a path an output must not
// replace (check_output_paths). Candidates that are not files are harmless:
// inputs that do not exist are not compared.
std::vector<NamedPath> input_files(const std::vector<std::string>& specs, const std::string& role);

}  // namespace tsarchive::cli
