// `run` as an operation: open the archive (for an edit with --record), pass
// the gate, complete the request from the archive (its kind; a .pt2's
// AOTInductor model; with --check the recorded inputs, outputs and
// tolerances), run it in libtorch's worker, write picture outputs, and with
// --record store a run that passed as the archive's self-check. The CLI
// (cli/cmd_run.cc) parses the request and renders the report.
#pragma once

#include <optional>
#include <string>

#include "contract/run.h"
#include "operations/notes.h"
#include "operations/run_images.h"
#include "operations/worker_settings.h"

namespace tsarchive {

// What makes a run fail (exit 1).
struct RunVerdict {
  std::string expect;            // what the outputs were compared with, for people
  bool allow_nonfinite = false;
  bool nonfinite_fails(const RunReport& r) const { return !allow_nonfinite && r.nonfinite() > 0; }
  bool passed(const RunReport& r) const { return !nonfinite_fails(r) && r.checks_passed(); }
};

struct RunSettings {
  std::string model;
  RunRequest request;            // as asked: method, inputs, device, timing, outputs to save, progress
  std::string method;            // --method as given; empty: forward, or the recorded check's
  bool check = false;            // replay the archive's recorded check
  bool record = false;           // store a run that passed as the archive's check
  bool sample_inputs = false;    // a .pt2 package's own inputs
  bool tolerances_given = false;  // --atol/--rtol given: they win over the recorded check's
  RunImageOptions images;
  RunVerdict verdict;
  double lock_timeout = 10;
  WorkerSettings worker;
};

struct RunResult {
  RunReport report;  // with the operation's notes added
  std::optional<TopReport> top;
};

// Throws Error for what stops the run (a refused archive, usage that the
// archive contradicts, a worker failure); failed checks are in the report.
RunResult run_archive(RunSettings settings, const NoteSink& notes);

}  // namespace tsarchive
