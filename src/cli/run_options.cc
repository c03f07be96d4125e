#include "cli/run_options.h"

#include <algorithm>
#include <stdexcept>

#include "base/error.h"
#include "core/edit/extra.h"
#include "core/inputs/input_values.h"
#include "format/byte_source.h"

namespace tsarchive::cli {

void apply_tolerances(const std::vector<std::string>& values, const char* flag, RunRequest& request) {
  for (const std::string& text : values) {
    const size_t eq = text.rfind('=');
    const std::string number = eq == std::string::npos ? text : text.substr(eq + 1);
    double value = 0;
    try {
      size_t used = 0;
      value = std::stod(number, &used);
      if (used != number.size() || !(value >= 0)) throw std::invalid_argument(number);
    } catch (const std::exception&) {
      throw_usage(std::string(flag) + " '" + text.substr(0, 60) + "' is not a tolerance",
                  std::string("give a number >= 0, or PATH=NUMBER for one output, e.g. ") + flag + " out[1]=1e-3");
    }
    const bool atol = std::string(flag) == "--atol";
    if (eq == std::string::npos) {
      (atol ? request.tolerance.atol : request.tolerance.rtol) = value;
      if (atol) request.tolerance.scaled = false;
    } else {
      const std::string path = text.substr(0, eq);
      if (path.rfind("out", 0) != 0) {
        throw_usage(std::string(flag) + " '" + text.substr(0, 60) + "': output paths start with 'out'",
                    "e.g. out, out[1], out[\"boxes\"], as the report names them");
      }
      auto [it, inserted] = request.tolerance_by_path.emplace(path, request.tolerance);
      (atol ? it->second.atol : it->second.rtol) = value;
      if (atol) it->second.scaled = false;
      (void)inserted;
    }
  }
}

std::vector<NamedPath> input_files(const std::vector<std::string>& specs, const std::string& role) {
  std::vector<NamedPath> out;
  for (const std::string& spec : specs) {
    if (spec.size() < 2 || spec[0] != '@' || spec == "@-") continue;
    const std::string files = spec.substr(1);
    out.push_back({role, files});                         // a path with ':' or ',' in it
    out.push_back({role, files.substr(0, files.find(':'))});  // @cat.jpg:resize=256
    for (size_t begin = 0; begin < files.size();) {       // @a.png,b.png
      const size_t comma = std::min(files.find(',', begin), files.find(':', begin));
      out.push_back({role, files.substr(begin, comma - begin)});
      if (comma == std::string::npos || files[comma] == ':') break;
      begin = comma + 1;
    }
  }
  return out;
}

// --check: the request comes from the archive's recorded check.

}  // namespace tsarchive::cli
