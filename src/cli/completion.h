// Shell completion scripts generated from the command table itself (the CLI11
// app cli.cc builds), so they never drift from the commands and options:
// `tsarchive __complete bash|zsh|fish` prints one; the build runs it and
// `cmake --install` puts each where its shell looks (CMakeLists.txt).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace tsarchive::cli {

// The completion script for `shell` ("bash", "zsh" or "fish"); Error(Usage)
// for another shell.
std::string completion_script(const CLI::App& top, const std::string& shell);

}  // namespace tsarchive::cli
