// The torch layer's JIT commands (jit.cc), called by the backend (backend.cc).
#pragma once

#include "contract/jit.h"

namespace tsarchive::torch_layer {

// Throws Error(Usage) for a missing method or inputs that do not fit it,
// Error(Torch) when libtorch fails (a trace, a pass, the save, the reload).
// Output mismatches are in the report's checks, not thrown.
ConvertReport convert_module(const ConvertRequest& request);
MethodGraph graph_of(const GraphRequest& request);
OpsReport operators_of(const GraphRequest& request);

}  // namespace tsarchive::torch_layer
