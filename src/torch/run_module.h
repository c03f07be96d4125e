// The torch layer's `run` (run.cc), called by the backend (backend.cc).
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "contract/run.h"
#include "contract/serve.h"

namespace tsarchive::torch_layer {

RunReport run_module(const RunRequest& request);

// run on a .pt2's AOTInductor model (aoti_run.cc): request.aoti_model is set.
RunReport run_aoti_package(const RunRequest& request);

// What both runs share (run.cc).
// --device: cpu, cuda, cuda:N; Error(Usage) for another text, Error(Torch)
// for a CUDA device this build or machine does not have.
c10::Device parse_device(const std::string& text, const std::string& file);
// Waits for the device's queued work (CUDA); nothing on the CPU.
void synchronize(const c10::Device& device);
// --load-library: dlopen()s each, Error(Torch) naming one that fails.
void load_libraries(const std::vector<std::string>& libraries);
// The request's warm-up and timed calls of `call` (synchronized on the
// device); the timed ones are profiled into `profile` when the request asks.
LatencySummary time_calls(const std::function<void()>& call, const c10::Device& device, const RunRequest& request,
                          int64_t batch, std::optional<ProfileReport>* profile = nullptr);

// serve: the module loaded once, answering many calls (contract/serve.h).
std::unique_ptr<ServedModel> open_served_model(const ServeModelRequest& request);

// "NVIDIA H100 80GB HBM3" for a CUDA device index (the driver's name for it).
std::string device_description(int cuda_index);
// {major, minor} of a CUDA device by the driver API; nullopt without one.
std::optional<std::pair<int, int>> cuda_compute_capability(int cuda_index);

}  // namespace tsarchive::torch_layer
