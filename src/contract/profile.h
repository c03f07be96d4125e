// `run --profile` as data: what to observe (ProfileRequest), what was seen
// (ProfileReport: the observer's snapshot plus the calls it covered), and the
// views made of it: the operator table with totals scaled by the sampling
// probability, and a Chrome trace event file. Nothing here includes libtorch;
// the observer that records them is tsarchive/operator_observer.h (torch layer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tsarchive/operator_events.h"

namespace tsarchive {

struct ProfileRequest {
  bool enabled = false;
  double sample = 1.0;  // (0, 1]
  bool record_shapes = false;
  std::string model_id;  // tags every event; the CLI defaults it to the archive's file name
  bool keep_events = false;  // for --trace-out
  std::string trace_name;    // --trace-out as given: Kineto's trace names its file
};

// Who recorded the --trace-out trace (ProfileReport::trace_by).
inline constexpr const char* kTraceByKineto = "kineto";
inline constexpr const char* kTraceByObserver = "tsarchive observer";

struct ProfileReport {
  ObserverSnapshot observed;
  std::string model_id;
  uint64_t calls = 0;    // method calls profiled
  double wall_ms = 0;    // their summed latency
  // With keep_events: kTraceByKineto where the linked libtorch has Kineto
  // (kineto_trace then holds its Chrome trace, every operator call of the
  // timed calls, CUDA kernels on a GPU), else kTraceByObserver (the observer's
  // kept events, observed.events). "" without keep_events.
  std::string trace_by;
  std::string kineto_trace;
};

// One line of the operator table. With sampling, counts and times are the
// observed ones divided by the probability: unbiased estimates.
struct OperatorRow {
  std::string name;
  std::string scope;
  std::string input_shapes;  // with --record-shapes: one row per distinct shape list
  uint64_t observed_calls = 0;
  double calls = 0;           // estimated over the whole profiled run
  double calls_per_method_call = 0;
  double total_ms = 0;
  double self_ms = 0;
  double average_us = 0;      // total / calls
  double self_percent = 0;    // of the profiled calls' wall time
};

struct OperatorTable {
  double sample = 1.0;
  bool estimated = false;    // sample < 1
  uint64_t sampled_calls = 0;
  std::vector<OperatorRow> rows;  // by self time, largest first
  double self_ms = 0;        // sum over the rows (estimated)
};

// Aggregates over model ids (a run has one); rows by (scope, name, shapes).
OperatorTable operator_table(const ProfileReport& report);

// The kept events as a Chrome trace event file (the JSON object format that
// chrome://tracing and Perfetto's JSON importer read): one complete ("X")
// event per call with microsecond times from the first event, one track per
// thread, the model id, scope, self time and shapes in each event's args.
std::string chrome_trace_json(const ProfileReport& report, const std::string& process_name, int64_t pid);

// The file --trace-out writes: Kineto's trace as it made it, or the observer's
// events by chrome_trace_json.
std::string trace_file_text(const ProfileReport& report, const std::string& process_name, int64_t pid);

}  // namespace tsarchive
