// tsarchive inspect MODEL... [--json] [--records] [--extra NAME] [--code [CLASS]]
//                        [--graph [--inlined] [--method NAME] [--format text|dot]] [--ops]
//
// Everything but --graph and --ops reads the archive with the core alone.
// Those two are operations (operations/jit_views.h): libtorch answers, after
// the archive passes the gate.
#include <CLI/CLI.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/utf8.h"
#include "cli/commands.h"
#include "cli/load_options.h"
#include "cli/many_files.h"
#include "cli/output.h"
#include "cli/report_inspect.h"
#include "cli/report_jit.h"
#include "cli/worker_options.h"
#include "core/edit/file_edit.h"
#include "core/inspect/inspect.h"
#include "operations/jit_views.h"

namespace tsarchive::cli {
namespace {

struct InspectOptions {
  std::vector<std::string> paths;
  std::string path;  // the one being inspected
  bool json = false;
  bool records = false;
  std::string extra;
  bool code = false;
  std::string code_class;
  bool graph = false;
  bool inlined = false;
  std::string method;
  std::string format = "text";
  bool ops = false;
  LoadSafetyOptions load;
  WorkerSettings worker;
};

void print_graph(const MethodGraph& graph, const InspectOptions& opts, Context& ctx) {
  if (opts.json) {
    ctx.out << json_text(graph_to_json(graph, opts.path)) << '\n';
  } else if (opts.format == "dot") {
    write_text(ctx.out, [&](std::ostream& text) { render_graph_dot(graph, text); });
  } else {
    ctx.out << escape_text(graph.text, TextEscape::Block);
  }
}

void print_ops(const OpsReport& ops, const InspectOptions& opts, Context& ctx) {
  for (const std::string& note : ops.notes) print_note(ctx.err, note);
  if (opts.json) {
    ctx.out << json_text(ops_to_json(ops, opts.path)) << '\n';
  } else {
    write_text(ctx.out, [&](std::ostream& text) { render_ops_yaml(ops, opts.path, text); });
  }
}

// --graph and --ops: libtorch, after the core's checks (a .pt2's graph: the core).
int print_jit_view(const InspectOptions& opts, Context& ctx) {
  JitViewSettings settings;
  settings.path = opts.path;
  settings.method = opts.method;
  settings.inlined = opts.inlined || opts.format == "dot";
  settings.worker = opts.worker;
  if (opts.ops) {
    print_ops(list_root_operators(settings, notes_on(ctx.err)), opts, ctx);
  } else {
    print_graph(read_method_graph(settings, notes_on(ctx.err)), opts, ctx);
  }
  return 0;
}

int print_extra(const InspectOptions& opts, Context& ctx) {
  const std::string bytes = read_extra_file(opts.path, opts.extra);
  const std::string what = "extra file '" + opts.extra + "'";
  std::string problem;
  if (opts.json) {
    nlohmann::ordered_json doc = {{"schema", "tsarchive.inspect-extra/1"}, {"file", opts.path}, {"name", opts.extra},
                                  {"size", bytes.size()}};
    if (!is_printable_utf8(bytes)) {
      throw_bad_input(what + " is binary and cannot be shown as JSON text", opts.path,
                      "print it without --json and redirect it to a file");
    }
    doc["text"] = bytes;
    if (auto parsed = parse_json_for_display(bytes, &problem)) {
      doc["json"] = std::move(*parsed);
    } else if (problem != kNotValidJson) {
      doc["json_problem"] = problem;
    }
    ctx.out << json_text(doc) << '\n';
    return 0;
  }
  if (const auto pretty = pretty_json(bytes, &problem)) {
    // Still the same JSON: escape_text writes C1 and bidi characters inside
    // strings as \uHHHH, which JSON reads back as the same characters.
    ctx.out << escape_text(*pretty, TextEscape::Block) << '\n';
    return 0;
  }
  if (problem != kNotValidJson) print_note(ctx.err, what + " is printed as stored, not pretty-printed: " + problem);
  write_content(ctx, bytes, what, "redirect the output to a file");
  return 0;
}

int run_inspect(const InspectOptions& opts, Context& ctx) {
  if (!opts.extra.empty()) return print_extra(opts, ctx);
  if (opts.graph || opts.ops) return print_jit_view(opts, ctx);
  if (opts.code) {
    ctx.out << escape_text(read_code(opts.path, opts.code_class), TextEscape::Block);
    return 0;
  }
  const InspectReport report = inspect_file(opts.path, opts.load);
  if (const std::string note = interrupted_edit_note(opts.path); !note.empty()) print_note(ctx.err, note);
  if (opts.json) {
    write_inspect_json(report, ctx.json_indent, ctx.out);
    ctx.out << '\n';
  } else {
    write_text(ctx.out, [&](std::ostream& text) { render_inspect_text(report, InspectView{opts.records}, text); });
  }
  return 0;
}

}  // namespace

Runner setup_inspect(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<InspectOptions>();
  app.description(
      "Show what a model file holds: its kind, records, extra files, tensors, modules and methods\n"
      "(for a .pt2: its programs, signatures, weights and AOTInductor models).\n"
      "Reads the ZIP directory and the pickles with a safe reader; never loads the model or executes code.\n"
      "Except --graph and --ops, which load it with libtorch (after verify's checks pass):\n"
      "  --graph       the method's TorchScript IR (libtorch's printing); --inlined inlines calls;\n"
      "                --format dot gives Graphviz DOT of the inlined graph (dot -Tsvg > graph.svg);\n"
      "                for a .pt2, a program's graph read from its JSON (no libtorch; --method picks the program)\n"
      "  --ops         the root operators the model calls, as the YAML list PyTorch's selective (custom)\n"
      "                mobile build takes: export_opnames for .pt, the bytecode's operator list for .ptl,\n"
      "                a program's graph for a .pt2 (no libtorch)\n"
      "Every file gets a Loading section: what torch.load (weights_only True and False), pickle.load,\n"
      "torch.jit.load or torch.export.load would import and call, judged by an allowlist (docs/load-safety.md).\n"
      "Plain pickle files (.pkl, .pickle, .bin) are read too.");
  app.add_option("model", opts->paths, "Model files (.pt, .ptl, .pth, .pt2, .onnx, .pkl); - reads standard input")->required();
  CLI::Option* json = app.add_flag(
      "--json", opts->json,
      "One JSON document (schema tsarchive.inspect/2) instead of text; JSON Lines for several files");
  app.add_flag("--records", opts->records, "List every record with kind, sizes, compression and data offset");
  CLI::Option* extra = app.add_option("--extra", opts->extra, "Print extra file NAME (JSON is pretty-printed)");
  CLI::Option* code = app.add_option("--code", opts->code_class,
                                     "Print the TorchScript source (of CLASS, by full or short name)")
                           ->expected(0, 1)
                           ->excludes(json)
                           ->excludes(extra);
  CLI::Option* graph = app.add_flag("--graph", opts->graph, "Print a method's TorchScript IR graph (loads libtorch)")
                           ->excludes(extra)
                           ->excludes(code);
  app.add_flag("--inlined", opts->inlined, "With --graph: inline calls to submodules and functions")->needs(graph);
  app.add_option("-m,--method", opts->method, "With --graph: the method (default: forward; of a .pt2: the program)")->needs(graph);
  app.add_option("--format", opts->format, "With --graph: text (default) or dot (Graphviz, inlined)")
      ->check(CLI::IsMember({"text", "dot"}))
      ->needs(graph);
  app.add_flag("--ops", opts->ops, "List the root operators as YAML for a selective build (loads libtorch)")
      ->excludes(extra)
      ->excludes(code)
      ->excludes(graph);
  add_load_safety_options(app, opts->load);
  add_worker_options(app, opts->worker, true, "With --graph or --ops: ");
  return [opts, code, &ctx] {
    opts->code = code->count() > 0;
    if (opts->paths.size() > 1 && (!opts->extra.empty() || opts->code || opts->graph || opts->ops)) {
      throw_usage("--extra, --code, --graph and --ops show one model; " + std::to_string(opts->paths.size()) +
                  " were given");
    }
    return for_each_file(opts->paths, opts->json, ctx, [&](const std::string& path) {
      opts->path = path;
      return run_inspect(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli
