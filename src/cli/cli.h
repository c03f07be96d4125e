#pragma once

#include <ostream>

namespace tsarchive::cli {

// The whole program: parses argv, runs one command, maps errors to exit codes.
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace tsarchive::cli
