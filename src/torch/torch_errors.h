// Every call into libtorch goes through torch_call(), so whatever it throws
// (c10::Error, whose what_without_backtrace() drops the C++ backtrace,
// torch::jit::ErrorReport, std::runtime_error, ...) reaches the CLI as one
// condensed line (torch_message.h), with the full text kept for --verbose.
#pragma once

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <exception>
#include <string>

#include "base/error.h"
#include "contract/torch_message.h"

namespace tsarchive::torch_layer {

// The linked libtorch as major.minor ("1.13"), for messages about operators
// it lacks.
inline std::string libtorch_release() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
}

// Runs f(), turning whatever libtorch throws into a condensed Error.
template <typename F>
auto torch_call(const std::string& file, const std::string& doing, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw condense_torch_message(e.what_without_backtrace(), file, doing, libtorch_release());
  } catch (const std::bad_alloc&) {
    throw condense_torch_message("out of memory (std::bad_alloc)", file, doing, libtorch_release());
  } catch (const std::exception& e) {
    throw condense_torch_message(e.what(), file, doing, libtorch_release());
  }
}

}  // namespace tsarchive::torch_layer
