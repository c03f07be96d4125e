#include "cli/suggest.h"

#include <CLI/CLI.hpp>

#include <map>

#include "base/edit_distance.h"
#include "base/strings.h"

namespace tsarchive::cli {
namespace {

// Names other tools use for what a tsarchive command does.
const std::map<std::string, std::string, std::less<>> kCommandAliases = {
    {"ls", "list"},     {"cat", "get"},      {"show", "get"},      {"remove", "rm"}, {"delete", "rm"},
    {"del", "rm"},      {"info", "inspect"}, {"check", "verify"},  {"compare", "diff"}};

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

const CLI::App* find_command(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

bool has_positionals(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional()) return true;
  }
  return false;
}

// The option `name` ("--json" or "-j") of `app`, if it has one.
const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional()) continue;
    if (starts_with(name, "--") ? opt->check_lname(name.substr(2)) : opt->check_sname(name.substr(1))) return opt;
  }
  return nullptr;
}

std::vector<std::string> long_option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

bool takes_value(const CLI::Option* opt) { return opt->get_type_size_max() > 0 && opt->get_items_expected_max() > 0; }

// Walks `args` as CLI11 would, command by command, and returns what the first
// word no command or option takes calls for.
std::optional<Error> first_unknown(const CLI::App& top, const std::vector<std::string>& args) {
  const CLI::App* app = &top;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") break;
    if (starts_with(word, "-") && word.size() > 1) {
      const std::string name = word.substr(0, word.find('='));
      const bool is_long = starts_with(name, "--");
      const CLI::Option* opt = find_option(*app, is_long ? name : name.substr(0, 2));
      if (opt == nullptr && app == &top) {
        // `tsarchive -q inspect m.pt`: an option of the command, before it.
        for (size_t j = i + 1; j < args.size(); ++j) {
          const CLI::App* sub = find_command(top, args[j]);
          if (sub == nullptr || find_option(*sub, is_long ? name : name.substr(0, 2)) == nullptr) continue;
          const std::string command = command_path(*sub);
          return Error(ErrorKind::Usage, "'" + name + "' is an option of '" + command + "': it goes after the command",
                       {}, "write it as '" + command + " " + word + " ...'");
        }
      }
      if (opt == nullptr) {
        if (!is_long) return std::nullopt;  // CLI11's message names it; short names are too short to guess
        const std::optional<std::string> near = closest_match(name, long_option_names(*app));
        if (!near) return std::nullopt;
        return Error(ErrorKind::Usage, "unknown option '" + name + "' for '" + command_path(*app) + "'", {},
                     "did you mean '" + *near + "'? (see '" + command_path(*app) + " --help')");
      }
      const bool value_attached = word.find('=') != std::string::npos || (!is_long && word.size() > 2);
      if (takes_value(opt) && !value_attached) ++i;
      continue;
    }
    if (const CLI::App* sub = find_command(*app, word)) {
      app = sub;
      continue;
    }
    if (!app->get_subcommands({}).empty() && !has_positionals(*app)) return unknown_command(*app, word);
  }
  // Every word was taken: what is missing is a subcommand.
  if (!app->get_subcommands({}).empty() && app->get_require_subcommand_min() > 0) {
    std::string names;
    for (const std::string& n : command_names(*app)) names += (names.empty() ? "" : ", ") + n;
    return Error(ErrorKind::Usage, "'" + command_path(*app) + "' needs a command (" + names + ")", {},
                 "see 'tsarchive help " + command_path(*app).substr(std::string("tsarchive ").size()) + "'");
  }
  return std::nullopt;
}

// The command `word` was likely meant for: another tool's name for it
// (`ls`: `list`, one level down from the top: `extra list`), or the closest name.
std::string meant_command(const CLI::App& app, const std::string& word) {
  if (const auto alias = kCommandAliases.find(word); alias != kCommandAliases.end()) {
    if (find_command(app, alias->second)) return alias->second;
    if (!app.get_parent()) {
      for (const CLI::App* sub : app.get_subcommands({})) {
        if (find_command(*sub, alias->second)) return sub->get_name() + " " + alias->second;
      }
    }
  }
  return closest_match(word, command_names(app)).value_or("");
}

}  // namespace

Error unknown_command(const CLI::App& app, const std::string& word) {
  const std::string meant = meant_command(app, word);
  const std::string path = command_path(app);
  const std::string what = "unknown command '" + word + "'" + (app.get_parent() ? " for '" + path + "'" : "");
  if (meant.empty()) return Error(ErrorKind::Usage, what, {}, "see '" + path + " --help'");
  return Error(ErrorKind::Usage, what, {}, "did you mean '" + path + " " + meant + "'? (see '" + path + " --help')");
}

std::string command_path(const CLI::App& app) {
  return app.get_parent() != nullptr ? command_path(*app.get_parent()) + " " + app.get_name() : "tsarchive";
}

std::optional<Error> single_dash_slip(const CLI::App& top, const std::vector<std::string>& args) {
  const CLI::App* app = &top;
  for (const std::string& word : args) {
    if (word == "--") break;
    if (const CLI::App* sub = find_command(*app, word)) {
      app = sub;
      continue;
    }
    if (word.size() < 3 || word[0] != '-' || word[1] == '-') continue;
    const std::string name = word.substr(0, word.find('='));
    if (name.size() > 2 && find_option(*app, "-" + name) != nullptr) {
      return Error(ErrorKind::Usage, "'" + name + "' reads as '" + name.substr(0, 2) + " " + name.substr(2) + "'", {},
                   "did you mean '-" + name + "'? (long options take two dashes)");
    }
  }
  return std::nullopt;
}

std::optional<Error> explain_usage_error(const CLI::App& top, const std::vector<std::string>& args) {
  return first_unknown(top, args);
}

}  // namespace tsarchive::cli
