// libFuzzer target: tsarchive::fuzz::zip_structure (fuzz_entry.h, zip_structure.cc).
// Built with TSARCHIVE_FUZZ=ON and clang; run by scripts/fuzz.sh.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsarchive::fuzz::zip_structure(data, size);
  return 0;
}
