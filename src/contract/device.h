// The --device values of run and serve: "cpu", "cuda", "cuda:N".
#pragma once

#include <string>

namespace tsarchive {

// Whether `device` names a CUDA device ("cuda", "cuda:N"). Such a job's
// worker starts the NVIDIA driver before its sandbox (worker/sandbox.h).
inline bool is_cuda_device(const std::string& device) { return device.rfind("cuda", 0) == 0; }

}  // namespace tsarchive
