// Reading commands that take several archives (inspect, verify, extra list,
// stamp, run --check): one report per file, in the order given, then a
// summary; the exit status is the worst (highest) of the files'.
//
// Text: the reports one after another, a blank line between them, then
//   N files: A ok, S skipped (not a model), B failed (exit C): REASON...
// --json: JSON Lines, one document per line: each file's report (the schema it
// has alone) or, for a file that failed with an error, a tsarchive.error/1
// object; then a summary line (schema tsarchive.summary/1). A single file is
// reported as before: one document, indented, and no summary.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace tsarchive::cli {

// What `one` returns for a file it skipped (verify's directory scan: a file
// that is no model, reported as such by `one`): counted apart, never in the
// exit status.
inline constexpr int kSkippedFile = -1;

// Calls `one` for each path and returns the worst exit status. With one path,
// `one`'s error goes to the one catch as for any command; with several, each
// file's error is reported (output.h, report_current_exception) and the next
// file goes on. Sets ctx.many_files and, with `json`, ctx.json_indent = -1.
// Refuses (exit 2) a standard input named more than once: it can be read once.
int for_each_file(const std::vector<std::string>& paths, bool json, Context& ctx,
                  const std::function<int(const std::string& path)>& one);

// Throws a usage error when standard input ('-') is among `paths` more than once.
void check_stdin_named_once(const std::vector<std::string>& paths);

}  // namespace tsarchive::cli
