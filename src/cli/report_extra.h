// Rendering of extra/ listings and edits: text for people, JSON for machines.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/edit/extra.h"
#include "core/edit/file_edit.h"

namespace tsarchive::cli {

// The NAME / SIZE / PREVIEW table (shared with inspect).
void render_extra_table(const std::vector<ExtraFileInfo>& files, std::ostream& out);
nlohmann::ordered_json extra_files_to_json(const std::vector<ExtraFileInfo>& files);

struct ExtraEditReport {
  std::string path;    // the archive edited
  std::string output;  // where it was written (== path unless -o)
  const ExtraEditPlan* plan;
  WriteResult result;
};

void render_extra_edit_text(const ExtraEditReport& report, std::ostream& out);
nlohmann::ordered_json extra_edit_to_json(const ExtraEditReport& report);

}  // namespace tsarchive::cli
