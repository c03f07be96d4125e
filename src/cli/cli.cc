// The program: a command table, one parse, one catch, the exit codes of
// ARCHITECTURE.md ("Exit codes"). Subcommands live in cmd_<name>.cc.
#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "base/build_info.h"
#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/output.h"
#include "cli/suggest.h"
#include "base/error.h"
#include "contract/torch_backend.h"
#include "cli/worker_options.h"
#include "worker/model_worker.h"
#include "worker/worker.h"

namespace tsarchive::cli {
namespace {

// --version: what this build is, from build_info() alone: no libtorch is
// loaded, so it answers in milliseconds.
void print_build(std::ostream& out) {
  const BuildInfo& b = build_info();
  out << "tsarchive " << b.version << " (commit " << b.commit << ")\n";
  if (!b.with_torch) {
    out << "libtorch none (built without the torch layer: -DTSARCHIVE_WITH_TORCH=OFF)\n";
    return;
  }
  out << "libtorch " << b.torch_version << " (built against; reads format versions " << b.reads_format_min << " to "
      << b.reads_format_max << ", bytecode " << b.reads_bytecode_min << " to " << b.reads_bytecode_max << ")\n";
  out << "cuda " << (b.torch_cuda ? "built in" : "not built in (CPU-only libtorch)") << '\n';
}

// --version --verbose: loads the torch layer in a worker and says what it
// found and where.
void print_runtime(std::ostream& out) {
  const TorchLayerLocation where = locate_torch_layer();
  out << "torch layer  " << (where.path.empty() ? "not found" : shown(where.path));
  if (where.path.empty() || where.from_environment) {
    out << " (" << (where.from_environment ? "TSARCHIVE_TORCH_LIBRARY" : "looked for");
    for (const std::string& path : where.tried) out << ' ' << shown(path);
    out << ')';
  }
  out << '\n';
  try {
    const auto info = in_worker<TorchRuntimeInfo>(worker_job(WorkerOptions{}, "", 0, "reading its version"),
                                                  [](TorchBackend& torch) { return torch.runtime_info(); });
    out << "in use       libtorch " << info.libtorch_version;
    if (!info.library_path.empty()) out << " (" << shown(info.library_path) << ")";
    out << '\n';
    out << "in use       cuda " << (info.cuda_built ? "built in" : "not built in (CPU-only libtorch)");
    if (info.cuda_built) out << ", " << info.cuda_device_count << " device(s) visible";
    out << '\n';
    for (size_t i = 0; i < info.cuda_devices.size(); ++i) out << "  cuda:" << i << "  " << shown(info.cuda_devices[i]) << '\n';
  } catch (const Error& e) {
    out << "libtorch unavailable: " << shown(e.what()) << '\n';
  }
}

int print_version(Context& ctx, bool verbose) {
  print_build(ctx.out);
  if (verbose) print_runtime(ctx.out);
  return 0;
}

}  // namespace

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // serve's model workers are this binary, exec'd (worker/model_worker.h).
  if (argc == 4 && std::string(argv[1]) == "__model-worker") return model_worker_main(std::atoi(argv[2]), std::atoi(argv[3]));
  Context ctx{out, err};
  CLI::App app{"tsarchive: read, check, edit and run TorchScript archives", "tsarchive"};
  app.set_help_all_flag("--help-all", "Print help for every command");
  bool show_version = false, version_verbose = false;
  CLI::Option* version = app.add_flag(
      "--version", show_version, "Print the tool version, build commit, the libtorch and CUDA it was built with, and exit");
  app.add_flag("--verbose", version_verbose,
               "With --version: also load libtorch and say what was found and where (the torch layer, libtorch's "
               "file, CUDA devices)")
      ->needs(version);
  app.require_subcommand(0, 1);
  const std::string exit_codes =
      "Exit codes: 0 ok, 1 a check failed, 2 usage error, 3 invalid or unsupported input,\n"
      "            4 I/O error, 5 libtorch failed, 6 internal error. See man tsarchive.";
  app.footer(exit_codes);  // inherited by nested subcommands (extra set, ...)

  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.summary);
    runners.emplace_back(sub, command.setup(*sub, ctx));
    // `tsarchive --help` lists the one-line summaries; a command's own --help
    // shows the summary, its options, then the longer description it set.
    if (sub->get_description() != command.summary) {
      sub->footer(sub->get_description() + "\n\n" + exit_codes);
      sub->description(command.summary);
    }
  }

  // Only the top-level help: which libtorch and how to choose another.
  app.footer(exit_codes +
             "\nlibtorch: each build links one (Debian's 1.13, pip's 2.x: scripts/dev.sh torch2, or any through\n"
             "CMAKE_PREFIX_PATH); --version names it. Archives it cannot read are refused with the reason.");

  const std::vector<std::string> args(argv + 1, argv + argc);
  // The completion scripts the build installs, from this very table (completion.h).
  if (args.size() == 2 && args[0] == "__complete") {
    try {
      out << completion_script(app, args[1]);
      return 0;
    } catch (...) {
      return report_current_exception(err, false);
    }
  }
  if (const std::optional<Error> slip = single_dash_slip(app, args)) {  // -input 2x10
    print_error(err, *slip);
    return static_cast<int>(ErrorKind::Usage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help
    if (const std::optional<Error> better = explain_usage_error(app, args)) {  // did you mean ...
      print_error(err, *better);
      return static_cast<int>(ErrorKind::Usage);
    }
    err << "tsarchive: error: " << shown(e.what()) << ": see 'tsarchive ";
    for (const CLI::App* sub = &app; sub != nullptr;) {  // the deepest subcommand named
      const CLI::App* next = nullptr;
      for (const CLI::App* child : sub->get_subcommands()) {
        err << child->get_name() << ' ';
        next = child;
      }
      sub = next;
    }
    err << "--help'\n";
    return static_cast<int>(ErrorKind::Usage);
  }

  if (show_version) return print_version(ctx, version_verbose);
  try {
    for (auto& [sub, runner] : runners) {
      if (!sub->parsed()) continue;
      const int code = runner();
      out.flush();
      if (!out) throw_io("cannot write the output", "<stdout>", "check the disk space, or where stdout goes");
      return code;
    }
  } catch (...) {
    return report_current_exception(err, ctx.verbose);
  }
  err << app.help();
  return static_cast<int>(ErrorKind::Usage);
}

}  // namespace tsarchive::cli
