// tsarchive convert MODEL -o OUT --input SPEC... [--method NAME] [--freeze]
//                        [--optimize-for-inference | --mobile] [--lite] [--atol A --rtol R] [--json]
//
// Turns a training-time archive into a deployment archive (convert_flow.h):
// eval, freeze, optimize for inference or for mobile, save as TorchScript or
// lite-interpreter bytecode; the result is loaded back and must compute what
// the original does on the check inputs before it is moved into place.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/convert_options.h"

namespace tsarchive::cli {

Runner setup_convert(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<ConvertOptions>();
  app.description(
      "Make a deployment archive from a TorchScript archive. Steps run in this order, each optional:\n"
      "  eval                      always: deployment runs eval mode (an archive saved in training mode\n"
      "                            is converted in eval mode, and a note says so)\n"
      "  --freeze                  parameters and submodules become constants; conv+batchnorm fold\n"
      "  --optimize-for-inference  freeze, then server passes (MKL-DNN); libtorch 1.13 writes archives it\n"
      "                            cannot load back for convolutions: the reload check refuses them\n"
      "  --mobile                  optimize_for_mobile: fold, freeze, prepack for XNNPACK\n"
      "  --lite / OUTPUT.ptl       save lite-interpreter bytecode (_save_for_mobile) instead of .pt\n"
      "The new archive is staged next to OUTPUT, loaded back (torch::jit::load, or _load_for_mobile for\n"
      ".ptl), run on the check inputs and compared with the original (--atol/--rtol); only then is it\n"
      "stamped (extra/producer_info.json) and moved into place. Otherwise nothing is written.\n"
      "\n"
      "Example: tsarchive convert model.pt --input 1x3x224x224 --mobile -o model.ptl");
  add_convert_options(app, *opts, ctx);
  return [opts, &ctx] { return run_convert(*opts, ctx); };
}

}  // namespace tsarchive::cli
