// trace and convert are one operation (convert.cc): gate the input, stage the
// output next to its destination, let the torch layer make, save, reload and
// compare the new archive, then judge it (the checks, --strict, methods the
// new archive lacks), stamp it and move it into place, or remove it and say
// why. The CLI's options and rendering are cli/convert_options.h and
// cli/report_jit.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/jit.h"
#include "operations/notes.h"
#include "operations/worker_settings.h"

namespace tsarchive {

struct ConvertSettings {
  std::string model;   // the original archive; never changed
  std::string output;  // where the new archive goes
  ConvertRequest request;  // the steps and the check inputs, as parsed (archive, output and stamp are filled here)
  bool strict = false;      // trace: a warning fails the operation
  bool allow_drop = false;  // write even when the new archive lacks methods of the original
  bool host = true;         // the host name and user in the stamp
  bool git = true;          // the working directory's git checkout in the stamp
  WorkerSettings worker;
};

// What became of the new archive.
struct ConvertOutcome {
  std::string command;  // "trace" | "convert"
  std::string file;
  std::string output;
  bool written = false;
  uint64_t size = 0;
  std::string failure;       // why nothing was written (a check failed); empty when written
  std::string failure_hint;  // what to do about it
  std::string stamp_record = "extra/producer_info.json";  // where the stamp went
  std::vector<std::string> carried;  // extra files carried over from the original (names under extra/)
};

struct ConvertResult {
  ConvertReport report;  // the torch layer's, with the operation's notes added
  ConvertOutcome outcome;
};

// Throws Error for what stops the operation before a verdict (an unreadable
// or refused input, a worker failure); a verdict against writing is
// outcome.failure, with nothing written.
ConvertResult convert_archive(ConvertSettings settings, const NoteSink& notes);

// The file name libtorch names an archive's top folder after: deploy.pt ->
// deploy, as Python's torch.jit.save does.
std::string stem_of(const std::string& path);

// Empty when the report allows writing; else one sentence: the first output
// that differs from the original, or (with `strict`) the first trace warning.
std::string convert_failure(const ConvertReport& report, bool strict);

// "trace forward > eval > freeze > save TorchScript (.pt)"
std::string steps_text(const std::vector<std::string>& steps);

}  // namespace tsarchive
