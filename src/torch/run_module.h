// The torch layer's `run` (run.cc), called by the backend (backend.cc).
#pragma once

#include <memory>
#include <string>

#include "contract/run.h"
#include "contract/serve.h"

namespace tsarchive::torch_layer {

RunReport run_module(const RunRequest& request);

// serve: the module loaded once, answering many calls (contract/serve.h).
std::unique_ptr<ServedModel> open_served_model(const ServeModelRequest& request);

// "NVIDIA H100 80GB HBM3" for a CUDA device index (the driver's name for it).
std::string device_description(int cuda_index);

}  // namespace tsarchive::torch_layer
