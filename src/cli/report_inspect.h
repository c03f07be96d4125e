// Rendering of an InspectReport: a text report for people, JSON for machines.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/inspect/inspect.h"

namespace tsarchive::cli {

struct InspectView {
  bool records = false;  // the full record table instead of a summary by kind
};

void render_inspect_text(const InspectReport& report, const InspectView& view, std::ostream& out);
// The JSON document (schema tsarchive.inspect/2), and the same as text, streamed
// without building it: json_text(inspect_to_json(report), indent), byte for byte.
nlohmann::ordered_json inspect_to_json(const InspectReport& report);
std::string inspect_json_text(const InspectReport& report, int indent);
// The same text written to `out` as it is made, in chunks (inspect --json).
void write_inspect_json(const InspectReport& report, int indent, std::ostream& out);

// The .pt2 part of both (report_inspect_pt2.cc).
void render_pt2_text(const Pt2Contents& pt2, std::ostream& out);
nlohmann::ordered_json pt2_to_json(const Pt2Contents& pt2);

}  // namespace tsarchive::cli
