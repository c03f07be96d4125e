// Stamp every TorchScript archive a program saves.
//
// PyTorch's note on large-scale deployments: "a global hook allowing to
// attach extra files to any TorchScript archive produced in the current
// process ... tag models with producer metadata, akin to JPEG metadata
// produced by digital cameras". install_producer_info_hook() installs that
// hook (torch::jit::SetExportModuleExtraFilesHook) so that every
// torch::jit::save / Module::save of this process writes
// extra/producer_info.json: producer, time (SOURCE_DATE_EPOCH honoured), git
// source and CI run, host, the module's type and your fields (schema in
// tsarchive/producer_info.h). Record digests cannot be known while the
// records are being written; `tsarchive stamp --keep-bytes` adds them later
// without changing any other byte.
//
// Install once at start-up, before any thread saves a module (the hook is a
// process-wide std::function that libtorch reads without a lock):
//
//   #include <tsarchive/producer_hook.h>
//   int main() {
//     tsarchive::install_producer_info_hook({"my-exporter", "2.3.1"});
//     ...  module.save("model.pt");   // carries extra/producer_info.json
//   }
//
// CMake: find_package(tsarchive REQUIRED) and link tsarchive::hook.
#pragma once

#include <map>
#include <string>

namespace tsarchive {

struct ProducerHookOptions {
  std::string program;  // producer name in the stamp; default: this executable's name
  std::string version;  // the program's version
  std::map<std::string, std::string> fields;  // extra top-level strings (not reserved keys)
  bool host = true;     // record host name and user
  bool git = true;      // record the git checkout of the working directory, if any
};

// Gathers the context once (time, git, CI, host) and installs the hook,
// replacing any hook installed before. Throws std::invalid_argument for a
// reserved or malformed field key, or a bad SOURCE_DATE_EPOCH.
void install_producer_info_hook(const ProducerHookOptions& options = {});

// Removes the hook (archives saved afterwards carry no stamp).
void remove_producer_info_hook();

}  // namespace tsarchive
