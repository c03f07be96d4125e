// The program: a command table, one parse, one catch, the exit codes of
// man/tsarchive.1.md ("EXIT STATUS"). Subcommands live in cmd_<name>.cc.
#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <streambuf>
#include <unistd.h>

#include "base/build_info.h"
#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/output.h"
#include "cli/suggest.h"
#include "base/error.h"
#include "contract/torch_backend.h"
#include "cli/worker_options.h"
#include "worker/model_worker.h"
#include "worker/sandbox.h"
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
  out << "torch layer  " << (where.path.empty() ? "not found" : printable(where.path));
  if (where.path.empty() || where.from_environment) {
    out << " (" << (where.from_environment ? "TSARCHIVE_TORCH_LIBRARY" : "looked for");
    for (const std::string& path : where.tried) out << ' ' << printable(path);
    out << ')';
  }
  out << '\n';
  out << "sandbox      " << describe_sandbox(sandbox_support()) << '\n';
  try {
    WorkerJob job = worker_job_without_archive("reading its version");
    job.cuda = true;  // to count the devices (sandbox.h: CUDA starts before the sandbox)
    const auto info = in_worker<TorchRuntimeInfo>(job, [](TorchBackend& torch) { return torch.runtime_info(); });
    out << "in use       libtorch " << info.libtorch_version;
    if (!info.library_path.empty()) out << " (" << printable(info.library_path) << ")";
    out << '\n';
    out << "in use       cuda " << (info.cuda_built ? "built in" : "not built in (CPU-only libtorch)");
    if (info.cuda_built) out << ", " << info.cuda_device_count << " device(s) visible";
    out << '\n';
    for (size_t i = 0; i < info.cuda_devices.size(); ++i) out << "  cuda:" << i << "  " << printable(info.cuda_devices[i]) << '\n';
  } catch (const Error& e) {
    out << "libtorch unavailable: " << printable(e.what()) << '\n';
  }
}

int print_version(Context& ctx, bool verbose) {
  print_build(ctx.out);
  if (verbose) print_runtime(ctx.out);
  return 0;
}

// Whether the command named was given --json (or, when parsing failed,
// whether "--json" appears before any "--"): then an error is also a JSON
// object on stdout (output.h, error_to_json).
bool json_requested(const CLI::App& app, int argc, const char* const* argv) {
  for (const CLI::App* sub = &app; sub != nullptr;) {
    if (const CLI::Option* json = sub->get_option_no_throw("--json"); json != nullptr && json->count() > 0) return true;
    const auto named = sub->get_subcommands();
    sub = named.empty() ? nullptr : named.back();
  }
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    if (std::string(argv[i]) == "--json") return true;
  }
  return false;
}

// -q/--quiet and --color on every command that has no subcommands of its own
// (diff has its own -q, which also skips work only the text explains).
void add_output_flags(CLI::App& app, Context& ctx) {
  const auto subs = app.get_subcommands([](const CLI::App* sub) { return !sub->get_name().empty(); });
  for (CLI::App* sub : subs) add_output_flags(*sub, ctx);
  if (!subs.empty()) return;
  if (app.get_option_no_throw("-q") == nullptr) {
    app.add_flag("-q,--quiet", ctx.quiet,
                 "Print nothing on stdout: the exit status says how it went (errors and notes still go to stderr)");
  }
  app.add_option("--color", ctx.color, "Colour the error, warning and note prefixes and verify's verdict: auto (default), always, never")
      ->type_name("WHEN")
      ->check(CLI::IsMember({"auto", "always", "never"}).description(""));
}

// What ctx.out writes to under -q/--quiet.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

// Which commands a command line needs set up: the one it names (other than
// help, which describes the others), none for a bare --version, or every one
// (no command named, --help-all, completion scripts). Setting up the whole
// table took 0.5 ms of every start-up.
struct CommandChoice {
  bool every = true;
  const Command* one = nullptr;  // when not every: the command set up, or none
};

CommandChoice choose_commands(int argc, const char* const* argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--version") return {false, nullptr};
  if (argc < 2 || std::string_view(argv[1]) == "help") return {};
  for (int i = 2; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help-all") return {};
  }
  for (const Command& command : kCommands) {
    if (command.name == std::string_view(argv[1])) return {false, &command};
  }
  return {};
}

// On a usage error with some commands left out, it starts again with every
// one, so that suggestions and messages are the same either way.
// "tsarchive extra set": the deepest subcommand the command line named.
std::string deepest_command(const CLI::App& app) {
  std::string name = "tsarchive";
  for (const CLI::App* sub = &app; sub != nullptr;) {
    const CLI::App* next = nullptr;
    for (const CLI::App* child : sub->get_subcommands()) {
      name += ' ' + child->get_name();
      next = child;
    }
    sub = next;
  }
  return name;
}

// A command line CLI11 refused: what it probably meant (did you mean ...),
// else CLI11's words and the deepest command's --help; on `json_out` too
// when --json was asked.
int report_usage_error(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args,
                       std::ostream* json_out, std::ostream& err) {
  const std::optional<Error> better = explain_usage_error(app, args);
  const Error usage = better ? *better : Error(ErrorKind::Usage, e.what(), {}, "see '" + deepest_command(app) + " --help'");
  print_error(err, usage);
  if (json_out != nullptr) *json_out << json_text(error_to_json(usage)) << '\n';
  return usage.exit_code();
}

// Runs the command the line named; nothing when it named none. Output that
// could not be written is an I/O error.
std::optional<int> run_parsed(const std::vector<std::pair<CLI::App*, Runner>>& runners, std::ostream& command_out,
                              std::ostream& out) {
  for (const auto& [sub, runner] : runners) {
    if (!sub->parsed()) continue;
    const int code = runner();
    command_out.flush();
    out.flush();
    if (!command_out || !out) throw_io("cannot write the output", "<stdout>", "check the disk space, or where stdout goes");
    return code;
  }
  return std::nullopt;
}

// CLI11's formatter, except that --help-all expands every level of commands:
// `extra`'s own commands get their options too (CLI11 lists them by name only).
class EveryLevelFormatter : public CLI::Formatter {
 public:
  std::string make_expanded(const CLI::App* sub) const override {
    std::stringstream out;
    out << sub->get_display_name(true) << "\n";
    out << make_description(sub);
    out << make_positionals(sub);
    out << make_groups(sub, CLI::AppFormatMode::Sub);
    out << make_subcommands(sub, CLI::AppFormatMode::All);
    std::string text = CLI::detail::find_and_replace(out.str(), "\n\n", "\n");
    text = text.substr(0, text.size() - 1);
    return CLI::detail::find_and_replace(text, "\n", "\n  ") + "\n";  // indented below its name
  }
};

int run_commands(int argc, const char* const* argv, std::ostream& out, std::ostream& err, CommandChoice chosen) {
  color_stderr(choose_color("auto", STDERR_FILENO));  // until --color is parsed
  std::ostream command_out(out.rdbuf());  // the commands' stdout, nowhere under -q
  NullBuffer nowhere;
  Context ctx{command_out, err, out};
  CLI::App app{"tsarchive: read, check, edit and run TorchScript and .pt2 (torch.export) archives", "tsarchive"};
  app.formatter(std::make_shared<EveryLevelFormatter>());  // before the commands, which share it
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
      "            4 I/O error, 5 libtorch failed, 6 internal error, 7 signature invalid or signer\n"
      "            not trusted, 8 unsafe to load, 129/130/143 interrupted by SIGHUP/SIGINT/SIGTERM.\n"
      "            See man tsarchive.";
  app.footer(exit_codes);  // inherited by nested subcommands (extra set, ...)

  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.summary);
    if (!chosen.every && chosen.one != &command) continue;
    runners.emplace_back(sub, command.setup(*sub, ctx));
    add_output_flags(*sub, ctx);
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
  if (!args.empty() && args[0] == "__complete") {
    try {
      if (args.size() != 2) throw_usage("'__complete' takes one shell", "tsarchive __complete bash|zsh|fish");
      out << completion_script(app, args[1]);
      return 0;
    } catch (...) {
      return report_current_exception(err, false);
    }
  }
  if (const std::optional<Error> slip = single_dash_slip(app, args)) {  // -input 2x10
    if (!chosen.every) return run_commands(argc, argv, out, err, CommandChoice{});
    print_error(err, *slip);
    if (json_requested(app, argc, argv)) out << json_text(error_to_json(*slip)) << '\n';
    return slip->exit_code();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help
    if (!chosen.every) return run_commands(argc, argv, out, err, CommandChoice{});
    return report_usage_error(app, e, args, json_requested(app, argc, argv) ? &out : nullptr, err);
  }

  color_stderr(choose_color(ctx.color, STDERR_FILENO));
  if (ctx.quiet) command_out.rdbuf(&nowhere);
  if (show_version) return print_version(ctx, version_verbose);
  try {
    if (const std::optional<int> code = run_parsed(runners, command_out, out)) return *code;
  } catch (...) {
    return report_current_exception(err, ctx.verbose, json_requested(app, argc, argv) ? &command_out : nullptr);
  }
  err << app.help();
  return static_cast<int>(ErrorKind::Usage);
}

}  // namespace

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // serve's model workers are this binary, exec'd (worker/model_worker.h).
  if ((argc == 5 || argc == 6) && std::string(argv[1]) == "__model-worker") {
    return model_worker_main(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), argc == 6 ? argv[5] : nullptr);
  }
  return run_commands(argc, argv, out, err, choose_commands(argc, argv));
}

}  // namespace tsarchive::cli
