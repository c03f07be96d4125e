// Rendering of `run --profile` and `run --api-usage`: the operator table and
// the API usage keys for people, and their part of the JSON document (which
// then carries the schema tsarchive.profile/1).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "contract/run.h"

namespace tsarchive::cli {

void render_profile_text(const RunReport& report, std::ostream& out);
// Adds "profile" and "api_usage" to a tsarchive.run/1 document when the
// report has them; with a profile the document becomes tsarchive.profile/1.
void add_profile_json(const RunReport& report, nlohmann::ordered_json& doc);

}  // namespace tsarchive::cli
