// The checks an archive passes before libtorch sees it (stamp, run, verify
// --load): libtorch 1.13 crashes, over-reads or allocates without bound on
// damaged archives, and never checks a CRC.
#pragma once

#include <iosfwd>
#include <string>

#include "format/archive.h"
#include "core/verify.h"

namespace tsarchive::cli {

// verify_archive() against the versions the built-against libtorch reads.
// Damage is Error(BadInput) naming the first problem; `consequence` says what
// did not happen ("nothing was written", "nothing was run").
VerifyReport require_intact(const TorchArchive& archive, const std::string& file, const std::string& consequence);

}  // namespace tsarchive::cli

namespace tsarchive::cli {

// What run, trace, convert and inspect --graph/--ops do before libtorch:
// require_intact(), or with --no-validate (`skip`) a note on `err` that the
// archive goes to libtorch unchecked.
void check_before_libtorch(const TorchArchive& archive, const std::string& file, const std::string& consequence,
                           bool skip, std::ostream& err);

}  // namespace tsarchive::cli
