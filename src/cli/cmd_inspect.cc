// tsarchive inspect MODEL [--json] [--records] [--extra NAME] [--code [CLASS]]
#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "report_inspect.h"
#include "tsarchive/error.h"
#include "tsarchive/inspect.h"

namespace tsarchive::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  bool records = false;
  std::string extra;
  bool code = false;
  std::string code_class;
};

int print_extra(const InspectOptions& opts, Context& ctx) {
  const std::string bytes = read_extra_file(opts.path, opts.extra);
  if (opts.json) {
    nlohmann::json doc = {{"schema", "tsarchive.extra/1"}, {"name", opts.extra}, {"size", bytes.size()}};
    if (!is_printable_utf8(bytes)) {
      throw_bad_input("extra file '" + opts.extra + "' is binary and cannot be shown as JSON text", opts.path,
                      "print it without --json and redirect it to a file");
    }
    doc["text"] = bytes;
    if (nlohmann::json::accept(bytes)) doc["json"] = nlohmann::json::parse(bytes);
    ctx.out << doc.dump(2) << '\n';
  } else if (nlohmann::json::accept(bytes)) {
    ctx.out << nlohmann::json::parse(bytes).dump(2) << '\n';
  } else if (!is_printable_utf8(bytes) && &ctx.out == &std::cout && ::isatty(STDOUT_FILENO)) {
    throw_usage("extra file '" + opts.extra + "' is binary (" + std::to_string(bytes.size()) +
                " bytes); not printing it to a terminal", "redirect the output to a file");
  } else {
    ctx.out << bytes;
  }
  return 0;
}

int run_inspect(const InspectOptions& opts, Context& ctx) {
  if (!opts.extra.empty()) return print_extra(opts, ctx);
  if (opts.code) {
    ctx.out << read_code(opts.path, opts.code_class);
    return 0;
  }
  const InspectReport report = inspect_file(opts.path);
  if (opts.json) {
    ctx.out << inspect_to_json(report).dump(2) << '\n';
  } else {
    render_inspect_text(report, InspectView{opts.records}, ctx.out);
  }
  return 0;
}

}  // namespace

Runner setup_inspect(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<InspectOptions>();
  app.description(
      "Show what a model file holds: its kind, records, extra files, tensors, modules and methods.\n"
      "Reads the ZIP directory and the pickles with a safe reader; never loads the model or executes code.");
  app.add_option("model", opts->path, "Model file (.pt, .ptl, .pth, .pt2, .onnx)")->required();
  CLI::Option* json = app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.inspect/1) instead of text");
  app.add_flag("--records", opts->records, "List every record with kind, sizes, compression and data offset");
  CLI::Option* extra = app.add_option("--extra", opts->extra, "Print extra file NAME (JSON is pretty-printed)");
  CLI::Option* code = app.add_option("--code", opts->code_class,
                                     "Print the TorchScript source (of CLASS, by full or short name)")
                           ->expected(0, 1)
                           ->excludes(json)
                           ->excludes(extra);
  return [opts, code, &ctx] {
    opts->code = code->count() > 0;
    return run_inspect(*opts, ctx);
  };
}

}  // namespace tsarchive::cli
