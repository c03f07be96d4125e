// --lock-timeout, as every command that edits an archive in place of its
// reader takes it (extra set/rm/import, stamp, sign --embed, run --record).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tsarchive::cli {

// `when`: the option it goes with ("With --embed: "), or empty. The range is
// in the text, where a user reads it, not in CLI11's "FLOAT:FLOAT in [0 - 86400]".
inline CLI::Option* add_lock_timeout(CLI::App& app, double& seconds, const std::string& when = {}) {
  return app
      .add_option("--lock-timeout", seconds,
                  (when.empty() ? "Seconds" : when + "seconds") +
                      " (0 to 86400) to wait for another tsarchive editing MODEL (default 10)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.0, 86400.0).description(""));
}

}  // namespace tsarchive::cli
