// Rendering of an InspectReport: a text report for people, JSON for machines.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "core/inspect.h"

namespace tsarchive::cli {

struct InspectView {
  bool records = false;  // the full record table instead of a summary by kind
};

void render_inspect_text(const InspectReport& report, const InspectView& view, std::ostream& out);
nlohmann::ordered_json inspect_to_json(const InspectReport& report);

// The .pt2 part of both (report_pt2.cc).
void render_pt2_text(const Pt2Contents& pt2, std::ostream& out);
nlohmann::ordered_json pt2_to_json(const Pt2Contents& pt2);

}  // namespace tsarchive::cli
