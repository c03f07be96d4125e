// The command table: what each subcommand is called, and the function that
// declares its options and returns how to run it. Whether a command loads
// libtorch depends on its flags (inspect --graph, verify --load), and only ever
// in a worker process (worker/worker.h), so the table does not say.
#pragma once

#include <functional>
#include <ostream>

namespace CLI {
class App;
}

namespace tsarchive::cli {

struct Context {
  std::ostream& out;   // reports: nowhere under -q
  std::ostream& err;
  std::ostream& data;  // stdout for a file named `-` (-o -, --save-outputs -): data asked for, kept under -q
  bool verbose = false;  // -v/--verbose of run, trace, convert: the one catch adds an error's detail
  bool many_files = false;  // several archives in one call (many_files.h)
  int json_indent = 2;      // json_text's indent: -1 for JSON Lines (several archives)
  bool quiet = false;       // -q/--quiet: ctx.out writes nowhere (cli.cc), ctx.data still writes
  std::string color = "auto";  // --color
};

using Runner = std::function<int()>;

struct Command {
  const char* name;
  const char* summary;
  Runner (*setup)(CLI::App& app, Context& ctx);
};

Runner setup_inspect(CLI::App& app, Context& ctx);
Runner setup_extra(CLI::App& app, Context& ctx);
Runner setup_stamp(CLI::App& app, Context& ctx);
Runner setup_verify(CLI::App& app, Context& ctx);
Runner setup_sign(CLI::App& app, Context& ctx);
Runner setup_diff(CLI::App& app, Context& ctx);
Runner setup_run(CLI::App& app, Context& ctx);
Runner setup_trace(CLI::App& app, Context& ctx);
Runner setup_convert(CLI::App& app, Context& ctx);
Runner setup_serve(CLI::App& app, Context& ctx);
Runner setup_help(CLI::App& app, Context& ctx);

// Every subcommand, in the order `--help` lists them.
inline constexpr Command kCommands[] = {
    {"inspect", "Show what a model file holds, without loading it", setup_inspect},
    {"extra", "List, read and edit extra/ files, keeping everything else byte-for-byte", setup_extra},
    {"stamp", "Write producer info and record digests into extra/producer_info.json", setup_stamp},
    {"verify", "Check structure, CRCs, versions and the stamp's digests; a model's signature with --key", setup_verify},
    {"sign", "Sign a model (file or directory) with an EC key or certificate, as OpenSSF model_signing does", setup_sign},
    {"diff", "Compare two archives: records, tensors, code and extra files; exit 1 if they differ", setup_diff},
    {"run", "Run a method on CPU or CUDA: describe outputs, check them, time it", setup_run},
    {"trace", "Record a method on example inputs into a new archive, checked against the original", setup_trace},
    {"convert", "Freeze, optimize, or write a mobile .ptl; the result is reloaded and checked first", setup_convert},
    {"serve", "Serve archives over HTTP (Open Inference Protocol / KServe v2), libtorch in worker processes", setup_serve},
    {"help", "Print the help of tsarchive, or of one command: tsarchive help extra set", setup_help},
};

}  // namespace tsarchive::cli
