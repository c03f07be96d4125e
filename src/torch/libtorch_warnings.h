// libtorch's warnings (TORCH_WARN: deprecations and the like) as tsarchive
// notes on stderr, one escaped line each, instead of c10's raw
// "[W... File.cpp:111] Warning: ... (function operator())" dumps. A warning
// the model's own code raises (TorchScript's warnings.warn) is the model's
// words, not libtorch's, and is named so: "tsarchive: note: the model warns:
// TEXT (code/__torch__/m.py:12)"; libtorch's are "tsarchive: note: libtorch:
// TEXT". A file's author can then write a note only under the model's name
// (native code aside: worker_output.h).
#pragma once

namespace tsarchive::torch_layer {

// Installs the handler for the calling thread (c10's handler is per thread
// on libtorch 2.x): the worker's, where the torch layer does its work.
void install_warning_notes();

}  // namespace tsarchive::torch_layer
