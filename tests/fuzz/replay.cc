// Replays files through the fuzz entry points (fuzz_entry.h) in the normal
// build, without libFuzzer, the way bloaty's tests/fuzz_driver.cc does: every
// file under the folders given (testdata/hostile, testdata/fuzz-crashes) goes
// through each target. A crash or an escaping non-tsarchive exception fails
// the test; the output names the file being replayed before it runs.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_entry.h"

namespace {

using Target = void (*)(const uint8_t*, size_t);

}  // namespace

int main(int argc, char** argv) {
  const std::pair<const char*, Target> targets[] = {{"zip_layer", tsarchive::fuzz::zip_layer},
                                                    {"pickle_reader", tsarchive::fuzz::pickle_reader},
                                                    {"inspect_path", tsarchive::fuzz::inspect_path},
                                                    {"zip_structure", tsarchive::fuzz::zip_structure},
                                                    {"json_text", tsarchive::fuzz::json_text},
                                                    {"image", tsarchive::fuzz::image},
                                                    {"signature_bundle", tsarchive::fuzz::signature_bundle},
                                                    {"sigstore_trust_root", tsarchive::fuzz::sigstore_trust_root},
                                                    {"load_safety", tsarchive::fuzz::load_safety},
                                                    {"worker_reply", tsarchive::fuzz::worker_reply}};
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argv[i])) {
      if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  int failures = 0;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    for (const auto& [name, target] : targets) {
      std::fprintf(stderr, "%s %s\n", name, path.c_str());
      try {
        target(data, bytes.size());
      } catch (const std::exception& e) {
        std::printf("FAIL %s on %s: escaped: %s\n", name, path.c_str(), e.what());
        ++failures;
      }
    }
  }
  std::printf("replayed %zu files through %zu targets: %d failures\n", files.size(), std::size(targets), failures);
  return failures == 0 && !files.empty() ? 0 : 1;
}
