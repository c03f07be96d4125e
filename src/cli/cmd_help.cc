// tsarchive help [COMMAND [SUBCOMMAND]]: the --help of tsarchive or of a
// command, on stdout, exit 0; an unknown command is a usage error naming the
// nearest one.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/suggest.h"

namespace tsarchive::cli {

Runner setup_help(CLI::App& app, Context& ctx) {
  auto topic = std::make_shared<std::vector<std::string>>();
  app.add_option("command", *topic, "The command to describe, and its subcommand: 'tsarchive help extra set'");
  return [&app, topic, &ctx] {
    const CLI::App* target = app.get_parent();
    for (const std::string& word : *topic) {
      const CLI::App* next = nullptr;
      for (const CLI::App* sub : target->get_subcommands({})) {
        if (sub->get_name() == word) next = sub;
      }
      if (next == nullptr) throw unknown_command(*target, word);
      target = next;
    }
    // App::help() would describe the command parsed (this one): format the target's.
    ctx.out << target->get_formatter()->make_help(target, command_path(*target), CLI::AppFormatMode::Normal);
    return 0;
  };
}

}  // namespace tsarchive::cli
