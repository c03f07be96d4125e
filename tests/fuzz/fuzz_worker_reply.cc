// libFuzzer target: tsarchive::fuzz::worker_reply (fuzz_entry.h). Built with
// TSARCHIVE_FUZZ=ON and clang; run by scripts/fuzz.sh.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsarchive::fuzz::worker_reply(data, size);
  return 0;
}
