// Rendering of `run` results: text for people, JSON (tsarchive.run/1) for machines.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "contract/run.h"
#include "core/inputs/run_check.h"
#include "operations/run.h"

namespace tsarchive::cli {

// Pieces the JIT commands' reports share (report_jit.cc).
void render_values(const char* title, const std::vector<ValueSummary>& values, std::ostream& out);
std::string tolerance_text(const Tolerance& t);
nlohmann::ordered_json values_to_json(const std::vector<ValueSummary>& values);
nlohmann::ordered_json checks_to_json(const std::vector<OutputCheck>& checks);

void render_run_text(const RunReport& report, const std::string& file, const RunVerdict& verdict, std::ostream& out);
nlohmann::ordered_json run_to_json(const RunReport& report, const std::string& file, const RunVerdict& verdict);
// One error line per failure on `err`; the exit code (0 or 1).
int report_run_failures(const RunReport& report, const std::string& file, const RunVerdict& verdict, std::ostream& err);

// run --top K (operations/run_images.h).
void render_top_text(const TopReport& top, std::ostream& out);
nlohmann::ordered_json top_to_json(const TopReport& top);

}  // namespace tsarchive::cli
