// The boundary between the libtorch-free program and the torch layer.
//
// The torch layer is a shared library (libtsarchive_torch.so) that links
// libtorch. The tsarchive binary does not link it: merely loading Debian's
// libtorch costs 0.5-0.7 s (287 shared libraries), so commands that do not
// need libtorch never pay it. Commands that do call load_torch_backend(),
// which dlopen()s the library and asks it for this interface.
#pragma once

#include <string>
#include <vector>

namespace tsarchive {

struct TorchRuntimeInfo {
  std::string libtorch_version;  // e.g. "1.13.1"
  bool cuda_built = false;       // the linked libtorch was built with CUDA
  int cuda_device_count = 0;
};

class TorchBackend {
 public:
  virtual ~TorchBackend() = default;
  virtual TorchRuntimeInfo runtime_info() const = 0;
};

// Loads the torch layer on first use. Throws Error(Torch) when it cannot be
// found or loaded, saying where it looked. Set TSARCHIVE_TORCH_LIBRARY to a
// path to override the search.
TorchBackend& load_torch_backend();

}  // namespace tsarchive

// The one symbol the torch layer exports; versioned so a stale library is
// refused instead of misused.
extern "C" tsarchive::TorchBackend* tsarchive_torch_backend_v1();
