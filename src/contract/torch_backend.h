// The boundary between the libtorch-free program and the torch layer.
//
// The torch layer is a shared library (libtsarchive_torch.so) that links
// libtorch. The tsarchive binary does not link it: merely loading Debian's
// libtorch costs 0.5-0.7 s (287 shared libraries), so commands that do not
// need libtorch never pay it. Commands that do call it in a worker process
// (worker/worker.h), which calls load_torch_backend(): it dlopen()s the
// library and asks it for this interface.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "contract/jit.h"
#include "contract/run.h"
#include "contract/serve.h"

namespace tsarchive {

// In a worker, fds 1 and 2 carry what the model prints (worker_output.h);
// this variable names the descriptor of the real stderr, where tsarchive's own
// notes go. The torch layer has its own std::cerr (it links libstdc++
// dynamically, the binary statically), so it is told by descriptor.
inline constexpr const char* kWorkerNotesFdVariable = "TSARCHIVE_WORKER_NOTES_FD";

struct TorchRuntimeInfo {
  std::string libtorch_version;  // e.g. "1.13.1"
  std::string library_path;      // the libtorch_cpu.so the worker loaded (its real path)
  bool cuda_built = false;       // the linked libtorch was built with CUDA
  int cuda_device_count = 0;
  std::vector<std::string> cuda_devices;  // their names
};

// Load a module and save it again, with extra/producer_info.json supplied by
// torch::jit's export hook (SetExportModuleExtraFilesHook), the mechanism a
// host program uses to stamp every archive it saves.
struct ResaveRequest {
  std::string input;   // an archive the core has validated (/proc/self/fd/N)
  std::string display_name;  // the user's path, for messages
  std::string output;  // torch::jit::save names the top folder after its stem
  std::vector<std::string> extra_names;  // extra/ files to carry over (not the stamp)
  std::string stamp;   // what the hook returns for the stamp; empty: no hook (a producer's
                       // own producer_info.json is among extra_names)
};

class TorchBackend {
 public:
  virtual ~TorchBackend() = default;
  virtual TorchRuntimeInfo runtime_info() const = 0;

  // Loads the module (CPU) from `path` (/proc/self/fd/N of the checked file)
  // and drops it. Throws Error(Torch) with libtorch's message condensed to one
  // line, naming `display_name` (the user's path).
  virtual void load(const std::string& path, const std::string& display_name) = 0;

  // Saves the module again with the stamp, then loads the copy back and
  // checks it has the same parameters and buffers (names, dtypes, shapes,
  // values), the same extra files, and the stamp. Throws Error(Torch) with
  // libtorch's message condensed to one line, Error(CheckFailed) naming the
  // first difference.
  virtual void resave_with_stamp(const ResaveRequest& request) = 0;

  // Loads the module on the request's device, calls the method on the
  // request's inputs, and reports outputs, checks and timings (run.h).
  // Throws Error(Usage) for inputs that do not fit the method, Error(Torch)
  // with libtorch's message condensed to one line (full text in detail()).
  virtual RunReport run(const RunRequest& request) = 0;

  // trace and convert (jit.h): makes the new module, saves it to
  // request.output with the stamp from the export hook, loads it back and
  // compares its outputs with the original's. Mismatches are in the report;
  // throws Error(Usage) for a missing method or inputs that do not fit it,
  // Error(Torch) when a step, the save or the reload fails.
  virtual ConvertReport convert(const ConvertRequest& request) = 0;

  // inspect --graph: a method's IR graph, as text and as plain data.
  virtual MethodGraph graph(const GraphRequest& request) = 0;
  // inspect --ops: the root operators (export_opnames; a .ptl's bytecode).
  virtual OpsReport operators(const GraphRequest& request) = 0;

  // serve (serve.h): loads the module on the request's device and selects
  // the method, once; the model then answers many infer() calls. Throws as
  // run() does.
  virtual std::unique_ptr<ServedModel> open_served(const ServeModelRequest& request) = 0;
};

}  // namespace tsarchive

// The one symbol the torch layer exports; versioned so a stale library is
// refused instead of misused.
extern "C" tsarchive::TorchBackend* tsarchive_torch_backend_v7();
