// Rendering of `run` results: text for people, JSON (tsarchive.run/1) for machines.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "contract/run.h"

namespace tsarchive::cli {

// What makes a run fail (exit 1).
struct RunVerdict {
  std::string expect;            // what the outputs were compared with, for people
  bool allow_nonfinite = false;
  bool nonfinite_fails(const RunReport& r) const { return !allow_nonfinite && r.nonfinite() > 0; }
  bool passed(const RunReport& r) const { return !nonfinite_fails(r) && r.checks_passed(); }
};

// Pieces the JIT commands' reports share (report_jit.cc).
void render_values(const char* title, const std::vector<ValueSummary>& values, std::ostream& out);
std::string tolerance_text(const Tolerance& t);
std::string check_text(const OutputCheck& c);  // "3 of 20 values outside tolerance; max abs error ..."
// What to do about a failed check: raise the tolerances only where values
// differ; a shape, type or missing value is no matter of tolerance.
std::string failed_check_hint(const OutputCheck& c);
nlohmann::ordered_json values_to_json(const std::vector<ValueSummary>& values);
nlohmann::ordered_json checks_to_json(const std::vector<OutputCheck>& checks);

void render_run_text(const RunReport& report, const std::string& file, const RunVerdict& verdict, std::ostream& out);
nlohmann::ordered_json run_to_json(const RunReport& report, const std::string& file, const RunVerdict& verdict);
// One error line per failure on `err`; the exit code (0 or 1).
int report_run_failures(const RunReport& report, const std::string& file, const RunVerdict& verdict, std::ostream& err);

}  // namespace tsarchive::cli
