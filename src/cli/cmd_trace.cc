// tsarchive trace MODEL --input SPEC... -o OUT [--method NAME] [--check-inputs N] [--strict]
//                      [--freeze] [--optimize-for-inference | --mobile] [--lite] [--atol A --rtol R] [--json]
//
// Records the method on the example inputs into a new archive (the flow is
// convert's, convert_flow.h, with tracing as its first step) and warns when
// the trace will not generalise: its outputs differ from the original's on
// fresh random inputs, or the original's control flow depends on the inputs.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/convert_options.h"

namespace tsarchive::cli {

Runner setup_trace(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<ConvertOptions>();
  opts->trace = true;
  app.description(
      "Run a method on example inputs with libtorch's tracer and write what it recorded as a new archive:\n"
      "tensor operations only, shapes and control flow fixed as the example took them. The new archive\n"
      "is loaded back and run on the example inputs, and must match the original (--atol/--rtol) before\n"
      "it is moved into place; otherwise nothing is written. It is also compared on --check-inputs fresh\n"
      "random inputs of the same shapes, and the original's branches and loops are checked for depending\n"
      "on the inputs: either gives a warning that the trace does not generalise (an error with --strict).\n"
      "--freeze, --optimize-for-inference, --mobile and --lite then apply as in 'tsarchive convert'.\n"
      "\n"
      "Example: tsarchive trace model.pt --input 1x3x224x224 --freeze -o deploy.pt");
  add_convert_options(app, *opts, ctx);
  app.add_option("--check-inputs", opts->check_inputs,
                 "Fresh random inputs to compare the trace with the original on (default 3; 0: none)")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--strict", opts->strict, "Fail (exit 1, nothing written) when the trace may not generalise");
  return [opts, &ctx] { return run_convert(*opts, ctx); };
}

}  // namespace tsarchive::cli
