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

}  // namespace tsarchive::cli
