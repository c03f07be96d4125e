// libFuzzer target: tsarchive::fuzz::inspect_path (fuzz_entry.h). Built with
// TSARCHIVE_FUZZ=ON and clang; run by scripts/fuzz.sh.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsarchive::fuzz::inspect_path(data, size);
  return 0;
}
