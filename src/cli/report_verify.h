// Rendering of `verify` and `stamp` results: text for people, JSON for machines.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/provenance/checked_archive.h"  // newer_libtorch_hint
#include "core/provenance/verify.h"

namespace tsarchive::cli {

std::string_view verify_outcome_id(VerifyOutcome outcome);  // "intact", "mismatch", "malformed"

// `signature_fails`: the archive's signature does not cover it; then the
// first line leads with that and vouches only for the records.
// The headline leads with what fails: an unsafe verdict, then the signature, then the records.
void render_verify_text(const VerifyReport& report, bool loaded, std::ostream& out, bool signature_fails = false,
                        bool unsafe = false);
nlohmann::ordered_json verify_to_json(const VerifyReport& report, bool loaded);

// The first line a stamp's JSON text says about itself, for `stamp` output.
nlohmann::ordered_json stamp_summary_to_json(const ParsedStamp& stamp);

}  // namespace tsarchive::cli
