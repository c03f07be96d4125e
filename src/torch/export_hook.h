// The process's export hook, shared by the torch layer (`stamp`) and the
// public hook library (producer_hook.h).
#pragma once

#include <functional>
#include <string>

namespace tsarchive::torch_layer {

// Installs a hook returning extra/producer_info.json made by `make_stamp`
// from the saved module's qualified type name. Replaces any earlier hook.
void install_stamp_hook(std::function<std::string(const std::string& module_type)> make_stamp);
void remove_stamp_hook();

}  // namespace tsarchive::torch_layer
