// The command-line face of trace and convert (operations/convert.h): the
// options both commands take, and the command that runs the operation and
// renders its result. cmd_trace.cc and cmd_convert.cc declare the commands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/worker_options.h"
#include "operations/convert.h"

namespace tsarchive::cli {

struct ConvertOptions {
  bool trace = false;  // `tsarchive trace`
  std::string model;
  std::string output;
  std::string method;
  std::vector<std::string> inputs;
  uint64_t seed = 0;
  std::vector<std::string> atol, rtol;
  int check_inputs = 3;  // trace: fresh inputs compared besides the example
  bool strict = false;   // trace: a warning fails the command
  bool freeze = false;
  bool optimize_for_inference = false;
  bool mobile = false;
  bool lite = false;
  bool no_host = false;
  bool no_git = false;
  bool json = false;
  bool allow_drop = false;  // write even when a step cannot keep an exported method
  WorkerSettings worker;
};

// The options both commands take (the model, -o, inputs, tolerances, the
// conversion steps, --json); trace adds its own.
void add_convert_options(CLI::App& app, ConvertOptions& opts, Context& ctx);

int run_convert(const ConvertOptions& opts, Context& ctx);

}  // namespace tsarchive::cli
