#include "libtorch_warnings.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "base/terminal_text.h"

namespace tsarchive::torch_layer {
namespace {

// Each message once: a TORCH_WARN inside a method repeats on every timed call.
// The line is what the CLI's print_note writes ("tsarchive: note: ..."),
// written here because the warning comes in the middle of a call that may
// still fail, and the worker's stderr is the user's.
void note(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!seen.insert(message).second) return;
  std::cerr << "tsarchive: note: libtorch: " << escape_text(message, TextEscape::Line) << '\n' << std::flush;
}

class NoteHandler final : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override { note(warning.msg()); }
#else
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override { note(msg); }
#endif
};

}  // namespace

void install_warning_notes() {
  static NoteHandler handler;
#if TORCH_VERSION_MAJOR >= 2
  c10::WarningUtils::set_warning_handler(&handler);
#else
  c10::Warning::set_warning_handler(&handler);
#endif
}

}  // namespace tsarchive::torch_layer
