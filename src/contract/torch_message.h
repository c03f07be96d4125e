// libtorch's error text, condensed to one line that says what to do.
//
// libtorch throws c10::Error, torch::jit::ErrorReport, std::runtime_error and
// others; their text runs to many lines (TorchScript tracebacks, a 40-line
// dispatch-key list, C++ backtraces). The common cases are recognised here
// (pure string work, so it is tested without libtorch); anything else keeps
// its first line. The torch layer keeps the full text in Error::detail().
#pragma once

#include <string>

#include "base/error.h"

namespace tsarchive {

// `raw`: libtorch's text (without backtrace); `doing`: what libtorch was asked
// to do ("load the module", "run forward"); `file`: the archive.
// `libtorch`: the linked libtorch's release ("1.13"), empty when unknown: an
// aten:: or prim:: operator it does not know is one a newer PyTorch added.
// Returns Error(Torch) with the condensed message, a hint, and `raw` as detail.
Error condense_torch_message(const std::string& raw, const std::string& file, const std::string& doing,
                             const std::string& libtorch = {});

}  // namespace tsarchive
