#include "libtorch_warnings.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "base/posix_fd.h"
#include "base/terminal_text.h"
#include "contract/torch_backend.h"

namespace tsarchive::torch_layer {
namespace {

// Each message once: a TORCH_WARN inside a method repeats on every timed call.
// The line is what the CLI's print_note writes ("tsarchive: note: ..."),
// written here because the warning comes in the middle of a call that may
// still fail, and the worker's stderr is the user's.
void note(const std::string& message, const std::string& prefix) {
  // A model decides what it warns and how often: the notes are bounded as the
  // model's own output is (worker_output.h), and so is the set of those seen.
  constexpr size_t kMaxNote = 2000, kMaxNotesBytes = 256 * 1024, kMaxSeen = 10000;
  static std::mutex mutex;
  static std::set<std::string> seen;
  static size_t written = 0;
  static bool cut = false;
  const std::lock_guard<std::mutex> lock(mutex);
  if (cut) return;
  const std::string text = message.size() > kMaxNote ? message.substr(0, kMaxNote) + "..." : message;
  if (seen.count(text) != 0) return;
  std::string line;
  if (written >= kMaxNotesBytes || seen.size() >= kMaxSeen) {
    cut = true;
    line = "tsarchive: note: libtorch: more warnings than are shown; the rest are left out\n";
  } else {
    seen.insert(text);
    line = prefix + escape_text(text, TextEscape::Line) + "\n";
    written += line.size();
  }
  static const char* const notes_fd = std::getenv(kWorkerNotesFdVariable);
  if (notes_fd == nullptr) {
    std::cerr << line << std::flush;
    return;
  }
  write_fully(std::atoi(notes_fd), line);
}

bool contains(const char* text, std::string_view part) {
  return text != nullptr && std::string_view(text).find(part) != std::string_view::npos;
}

// TorchScript's interpreter raises a warnings.warn of the model's code with
// the code's file and line, no function and `verbatim` set (or, for code with
// no file name, from its own source file); the lite interpreter from its own.
void note_warning(const c10::SourceLocation& where, const std::string& message, bool verbatim) {
  const bool from_code = verbatim && (where.function == nullptr || *where.function == '\0') && where.file != nullptr &&
                         *where.file != '\0';
  if (from_code) {
    note(message + " (" + where.file + ":" + std::to_string(where.line) + ")", "tsarchive: note: the model warns: ");
  } else if (contains(where.file, "jit/runtime/interpreter.cpp") || contains(where.file, "jit/mobile/interpreter.cpp")) {
    note(message, "tsarchive: note: the model warns: ");
  } else {
    note(message, "tsarchive: note: libtorch: ");
  }
}

class NoteHandler final : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override {
    note_warning(warning.source_location(), warning.msg(), warning.verbatim());
  }
#else
  void process(const c10::SourceLocation& where, const std::string& msg, const bool verbatim) override {
    note_warning(where, msg, verbatim);
  }
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
