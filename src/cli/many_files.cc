#include "cli/many_files.h"

#include <algorithm>
#include <map>
#include <ostream>

#include "base/error.h"
#include "cli/output.h"
#include "format/byte_source.h"

namespace tsarchive::cli {

void check_stdin_named_once(const std::vector<std::string>& paths) {
  if (std::count_if(paths.begin(), paths.end(), [](const std::string& p) { return is_standard_stream(p); }) > 1) {
    throw_usage("standard input ('-') is named more than once; it can be read once", "name it once");
  }
}

int for_each_file(const std::vector<std::string>& paths, bool json, Context& ctx,
                  const std::function<int(const std::string& path)>& one) {
  check_stdin_named_once(paths);
  if (paths.size() == 1) return std::max(one(paths.front()), 0);
  ctx.many_files = true;
  if (json) ctx.json_indent = -1;
  std::map<int, uint64_t> by_code;
  uint64_t skipped = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (i > 0 && !json) ctx.out << '\n';
    int code = 0;
    try {
      code = one(paths[i]);
    } catch (...) {
      ctx.out.flush();  // the error line follows what the file printed
      std::string reason;  // on the file's own line too, not only on standard error
      try {
        throw;
      } catch (const std::exception& e) {
        reason = e.what();
      } catch (...) {
      }
      code = report_current_exception(ctx.err, ctx.verbose, json ? &ctx.out : nullptr, ctx.json_indent);
      if (!json) {
        ctx.out << printable(paths[i]) << ": failed (exit " << code << ")"
                << (reason.empty() ? std::string() : ": " + printable(reason)) << '\n';
      }
    }
    if (code == kSkippedFile) {
      ++skipped;
      continue;
    }
    ++by_code[code];
  }
  const int worst = by_code.empty() ? 0 : by_code.rbegin()->first;
  const uint64_t ok = by_code.count(0) ? by_code[0] : 0;
  if (json) {
    nlohmann::ordered_json failed = nlohmann::ordered_json::object();
    for (const auto& [code, n] : by_code) {
      if (code != 0) failed[std::to_string(code)] = n;
    }
    ctx.out << json_text(nlohmann::ordered_json{{"schema", "tsarchive.summary/1"},
                                                {"files", paths.size()},
                                                {"ok", ok},
                                                {"skipped", skipped},
                                                {"failed", paths.size() - ok - skipped},
                                                {"failed_by_exit_code", failed},
                                                {"exit_code", worst}},
                         -1)
            << '\n';
    return worst;
  }
  ctx.out << '\n' << plural(paths.size(), "file") << ": " << with_commas(ok) << " ok";
  if (skipped > 0) ctx.out << ", " << with_commas(skipped) << " skipped (not a model)";
  for (const auto& [code, n] : by_code) {
    if (code != 0) ctx.out << ", " << with_commas(n) << " failed (exit " << code << ")";
  }
  ctx.out << '\n';
  return worst;
}

}  // namespace tsarchive::cli
