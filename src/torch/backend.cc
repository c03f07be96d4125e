// The torch layer: the only translation units that include libtorch headers.
// Each costs ~20 s and ~1 GB to compile, so keep them few and narrow.
#include <torch/cuda.h>
#include <torch/version.h>

#include "tsarchive/torch_backend.h"

namespace tsarchive {
namespace {

class LibtorchBackend final : public TorchBackend {
 public:
  TorchRuntimeInfo runtime_info() const override {
    TorchRuntimeInfo info;
    info.libtorch_version = TORCH_VERSION;
    info.cuda_device_count = static_cast<int>(torch::cuda::device_count());
#ifdef TSARCHIVE_TORCH_HAS_CUDA
    info.cuda_built = true;
#endif
    return info;
  }
};

}  // namespace
}  // namespace tsarchive

extern "C" __attribute__((visibility("default"))) tsarchive::TorchBackend* tsarchive_torch_backend_v1() {
  static tsarchive::LibtorchBackend backend;
  return &backend;
}
