// The torch layer's `run` (run.cc), called by the backend (backend.cc).
#pragma once

#include <string>

#include "contract/run.h"

namespace tsarchive::torch_layer {

RunReport run_module(const RunRequest& request);

// "NVIDIA H100 80GB HBM3" for a CUDA device index (the driver's name for it).
std::string device_description(int cuda_index);

}  // namespace tsarchive::torch_layer
