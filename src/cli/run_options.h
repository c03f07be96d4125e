// Options that run, trace and convert read the same way.
#pragma once

#include <string>
#include <vector>

#include "contract/run.h"

namespace tsarchive::cli {

// --atol / --rtol values: "1e-4" sets the default tolerance, "out[1]=1e-2"
// one output's (paths as the reports name them). Error(Usage) for anything else.
void apply_tolerances(const std::vector<std::string>& values, const char* flag, RunRequest& request);

}  // namespace tsarchive::cli
