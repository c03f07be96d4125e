// What CLI11 says about a mistyped command line, made useful: the nearest
// command or option ("did you mean"), the single-dash slip `-input 2x10`
// (which CLI11 would read as `-i nput`), and the commands a command that needs
// one can take. Each finding is an Error(Usage), printed by the one catch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace CLI {
class App;
}

namespace tsarchive::cli {

// Before parsing: `-input` where `--input` is an option of the command named
// so far. A cluster of short flags (`-qv`) or a short option with its value
// attached (`-oout.pt`) is not one.
std::optional<Error> single_dash_slip(const CLI::App& top, const std::vector<std::string>& args);

// After CLI11 refused `args`: the first word it could not take, when there is
// a better thing to say than its message: an unknown command (with the
// nearest one), an unknown option with a near one, or a command that needs a
// subcommand (listing them). std::nullopt: CLI11's message stands.
std::optional<Error> explain_usage_error(const CLI::App& top, const std::vector<std::string>& args);

// "unknown command 'inpsect'" with the nearest command of `app` (or the one
// other tools' name stands for: ls -> list) as the hint.
Error unknown_command(const CLI::App& app, const std::string& word);

// "tsarchive extra set": the command path of `app`.
std::string command_path(const CLI::App& app);

}  // namespace tsarchive::cli
