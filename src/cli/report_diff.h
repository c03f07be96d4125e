// Rendering of an ArchiveDiff: a summary and sections for people, JSON for machines.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "core/compare/diff.h"

namespace tsarchive::cli {

void render_diff_text(const ArchiveDiff& diff, std::ostream& out);
nlohmann::ordered_json diff_to_json(const ArchiveDiff& diff);

}  // namespace tsarchive::cli
