// What the operator observer (tsarchive/operator_observer.h) records, as
// plain data: one call (OperatorEvent), one operator's totals
// (OperatorStats), and a snapshot of both. `run --profile` hands these from
// the torch layer to the CLI (contract/profile.h). Standard C++ only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tsarchive {

// One sampled operator call.
struct OperatorEvent {
  std::string name;          // "aten::addmm", "forward", ...
  std::string scope;         // operator_scope_name(): "function", "torchscript", "lite_interpreter", ...
  std::string model_id;      // the innermost ModelIdGuard's on the calling thread; "" outside any
  uint64_t thread = 0;       // libtorch's logical thread id (1, 2, ...)
  int64_t start_ns = 0;      // steady clock
  int64_t duration_ns = 0;
  int64_t self_ns = 0;       // duration minus the operator calls nested in it
  std::string input_shapes;  // "[[1, 8], [16, 8], []]" with record_shapes; "" otherwise
};

// Sampled calls of one operator, aggregated.
struct OperatorStats {
  std::string name;
  std::string scope;
  std::string model_id;
  std::string input_shapes;
  uint64_t calls = 0;  // sampled calls
  int64_t total_ns = 0;
  int64_t self_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
};

struct ObserverSnapshot {
  double sample = 1.0;
  bool record_shapes = false;
  uint64_t sampled_calls = 0;
  uint64_t dropped_events = 0;           // not kept: max_events reached
  std::vector<OperatorStats> operators;  // by model id, scope, name, shapes
  std::vector<OperatorEvent> events;     // with keep_events, in the order calls ended
};

}  // namespace tsarchive
