// libtorch's warnings (TORCH_WARN: deprecations and the like) as tsarchive
// notes on stderr, one escaped line each, instead of c10's raw
// "[W... File.cpp:111] Warning: ... (function operator())" dumps.
#pragma once

namespace tsarchive::torch_layer {

// Installs the handler for the calling thread (c10's handler is per thread
// on libtorch 2.x): the worker's, where the torch layer does its work.
void install_warning_notes();

}  // namespace tsarchive::torch_layer
