// The command table: what each subcommand is called, what it needs, and the
// function that declares its options and returns how to run it.
#pragma once

#include <functional>
#include <ostream>

namespace CLI {
class App;
}

namespace tsarchive::cli {

struct Context {
  std::ostream& out;
  std::ostream& err;
};

using Runner = std::function<int()>;

struct Command {
  const char* name;
  const char* summary;
  bool needs_torch;  // loads the libtorch layer (0.5 s of dynamic loading on Debian)
  Runner (*setup)(CLI::App& app, Context& ctx);
};

Runner setup_inspect(CLI::App& app, Context& ctx);
Runner setup_extra(CLI::App& app, Context& ctx);
Runner setup_stamp(CLI::App& app, Context& ctx);
Runner setup_verify(CLI::App& app, Context& ctx);
Runner setup_diff(CLI::App& app, Context& ctx);
Runner setup_run(CLI::App& app, Context& ctx);
Runner setup_trace(CLI::App& app, Context& ctx);
Runner setup_convert(CLI::App& app, Context& ctx);

// Every subcommand, in the order `--help` lists them.
inline constexpr Command kCommands[] = {
    {"inspect", "Show what a model file holds, without loading it", false, setup_inspect},
    {"extra", "List, read and edit extra/ files, keeping everything else byte-for-byte", false, setup_extra},
    {"stamp", "Write producer info and record digests into extra/producer_info.json", true, setup_stamp},
    {"verify", "Check structure, CRCs, versions and the stamp's digests", false, setup_verify},
    {"diff", "Compare two archives: records, tensors, code and extra files; exit 1 if they differ", false, setup_diff},
    {"run", "Run a method on CPU or CUDA: describe outputs, check them, time it", true, setup_run},
    {"trace", "Record a method on example inputs into a new archive, checked against the original", true, setup_trace},
    {"convert", "Freeze, optimize, or write a mobile .ptl; the result is reloaded and checked first", true, setup_convert},
};

}  // namespace tsarchive::cli
