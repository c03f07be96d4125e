// Rendering of a LoadSafety verdict (core/inspect/load_safety.h): inspect's "Loading"
// section, verify's load-safety lines, and the `load_safety` JSON object of both.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "core/inspect/load_safety.h"

namespace tsarchive::cli {

void render_load_safety_text(const LoadSafety& safety, std::ostream& out);
nlohmann::ordered_json load_safety_to_json(const LoadSafety& safety);
// One line for people: "safe to load: ..." or the worst finding.
std::string load_safety_summary(const LoadSafety& safety);

}  // namespace tsarchive::cli
