#include "cli/worker_options.h"

#include <CLI/CLI.hpp>
#include <cctype>

namespace tsarchive::cli {

void add_worker_options(CLI::App& app, WorkerSettings& options, bool validate_flag, const std::string& when,
                        bool unsafe_flag) {
  const auto help = [&when](std::string text) {
    if (!when.empty()) text = when + static_cast<char>(std::tolower(static_cast<unsigned char>(text[0]))) + text.substr(1);
    return text;
  };
  app.add_option("--memory-limit", options.memory_limit,
                 help("Resident memory libtorch's worker may use (default auto: 4G, or 2G + 4x the\n"
                        "archive if more, at most 90% of RAM; none: no limit)"))
      ->type_name("SIZE");
  app.add_option("--disk-limit", options.disk_limit,
                 help("What libtorch's worker may write in its own folders (default auto: as --memory-limit's,\n"
                        "without the RAM bound; none: no limit)"))
      ->type_name("SIZE");
  app.add_option("--time-limit", options.time_limit_s, help("Seconds libtorch's worker may run (default 600; 0: none)"))
      ->type_name("SECONDS")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--load-library", options.libraries,
                 help("Shared library of custom operators or classes to load before the model (repeatable)"))
      ->type_name("LIB");
  if (unsafe_flag) {
    app.add_flag("--allow-unsafe-load", options.allow_unsafe_load,
               help("Load the model even when its load-safety verdict is dangerous or crafted (what verify exits 8\n"
                      "for); it still runs in the worker's sandbox"));
  }
  if (validate_flag) {
    app.add_flag("--no-validate", options.no_validate,
                 help("Hand the archive to libtorch without verify's checks (experts; still in the worker)"));
  }
}

void note_input_budget(CLI::App& app, const std::string& files) {
  CLI::Option* limit = app.get_option("--memory-limit");
  limit->description(limit->get_description() + ".\nThe tensors of " + files + " files may take half of it, all together");
}

}  // namespace tsarchive::cli
