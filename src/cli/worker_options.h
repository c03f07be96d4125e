// The flags of every command that hands an archive to libtorch's worker:
// --memory-limit, --disk-limit, --time-limit, --load-library and --no-validate, filling the
// operations' WorkerSettings (operations/worker_settings.h).
#pragma once

#include <string>

#include "operations/worker_settings.h"

namespace CLI {
class App;
}

namespace tsarchive::cli {

// Adds --memory-limit, --disk-limit, --time-limit and --load-library, --allow-unsafe-load
// when `unsafe_flag`, and --no-validate when `validate_flag`; `when` prefixes
// their help ("With --load: ").
void add_worker_options(CLI::App& app, WorkerSettings& settings, bool validate_flag, const std::string& when = {},
                        bool unsafe_flag = true);

// For the commands that read input files (run, trace, convert): --memory-limit's
// help says that the tensors of `files` ("--input and --expect") may take half
// of it (operations' input_budget).
void note_input_budget(CLI::App& app, const std::string& files);

}  // namespace tsarchive::cli
