// The options of the load-safety verdict, shared by inspect and verify.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/inspect/load_safety.h"

namespace tsarchive::cli {

inline void add_load_safety_options(CLI::App& app, LoadSafetyOptions& load) {
  app.add_option("--torch-version", load.torch_version,
                 std::string("Judge torch.load(weights_only=True) by the allowlist of this PyTorch (MAJOR.MINOR; "
                             "default ") + kNewestTorchVersion + ")")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const size_t dot = v.find('.');
            const bool ok = dot != std::string::npos && dot > 0 && dot + 1 < v.size() &&
                            v.find_first_not_of("0123456789.") == std::string::npos;
            return ok ? std::string() : "expected MAJOR.MINOR, such as 2.5";
          },
          "MAJOR.MINOR"));
  app.add_option("--allow-global", load.allowed_globals,
                 "Treat MODULE.NAME (or MODULE.*; torch.ops.NAMESPACE for custom operators) as benign when loading, "
                 "like torch.serialization.add_safe_globals; repeatable")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v.find('.') == std::string::npos || v.front() == '.' || v.back() == '.'
                       ? "expected MODULE.NAME, such as mymodel.Config"
                       : std::string();
          },
          "MODULE.NAME"));
}

}  // namespace tsarchive::cli
