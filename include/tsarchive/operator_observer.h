// Always-on operator profiling and API usage logging for a process that runs
// TorchScript models: the first two sections of PyTorch's note "Features for
// large-scale deployments", packaged so that a service installs them once.
//
// The observer registers one global RecordFunction callback
// (at::addGlobalCallback) with a sampling probability: libtorch then decides
// per operator call whether to call it, so an unsampled call costs almost
// nothing. For each sampled call it measures wall time and "self" time (its
// duration minus the operators called inside it), optionally the input
// shapes, and the model id set on the calling thread by a ModelIdGuard (a
// c10::ThreadLocalDebugInfo entry, which libtorch carries into at::launch
// tasks). Results are aggregated per (model id, scope, operator, shapes)
// under a mutex, passed to your sink, or both.
//
// Self time with sampling: libtorch samples each call independently, so a
// sampled operator's children are usually unsampled. While a sampled operator
// runs, the observer therefore times every call nested in it on that thread
// (a thread-local callback, removed when the operator returns) so that its
// self time is exact; only sampled calls are reported. Counts and times
// scaled by 1/P are unbiased estimates of the whole run's. Cost on libtorch
// 1.13: about 2 us per sampled call (switching the thread-local callback on
// and off rebuilds libtorch's callback cache), nothing for the others.
//
// Install and remove only while no operator runs (the note's rule: adding a
// global callback is not thread-safe), typically once at start-up:
//
//   #include <tsarchive/operator_observer.h>
//   int main() {
//     tsarchive::OperatorObserverOptions options;
//     options.sample = 0.01;                       // 1 in 100 operator calls
//     options.events_file = "/var/log/ops.jsonl";  // or options.on_event = ...
//     tsarchive::install_operator_observer(options);
//     tsarchive::install_api_usage_logger();
//     ...
//     {
//       tsarchive::ModelIdGuard tag("ranker-v3");  // events below carry it
//       module.forward(inputs);
//     }
//     for (const auto& op : tsarchive::operator_observer_snapshot().operators) ...
//   }
//
// CMake: find_package(tsarchive REQUIRED) and link tsarchive::observer.
// The header does not include libtorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tsarchive/operator_events.h"

// Exported from the libraries, which hide everything else.
#define TSARCHIVE_OBSERVER_API __attribute__((visibility("default")))

namespace tsarchive {

struct OperatorObserverOptions {
  double sample = 1.0;         // probability that an operator call is observed, in (0, 1]
  bool record_shapes = false;  // inputs are read for sampled calls only; still costly
  // Keep sampled events for a trace (operator_observer_snapshot().events), at
  // most max_events; later ones are counted as dropped.
  bool keep_events = false;
  size_t max_events = 1'000'000;
  // Sinks, each called once per sampled call, on the thread that ran it
  // (possibly several at once: make it thread-safe), after the call returned.
  std::function<void(const OperatorEvent&)> on_event;
  std::string events_file;  // appended to as JSON Lines, one event per line
};


// Installs the observer. Throws std::logic_error when one is installed
// already, std::invalid_argument for a sample outside (0, 1], and
// std::runtime_error when events_file cannot be opened.
TSARCHIVE_OBSERVER_API void install_operator_observer(const OperatorObserverOptions& options);

// Removes it; stats and events gathered so far are dropped. No-op when none
// is installed.
TSARCHIVE_OBSERVER_API void remove_operator_observer();

TSARCHIVE_OBSERVER_API bool operator_observer_installed();

// A copy of what was gathered since install or the last reset. Thread-safe.
TSARCHIVE_OBSERVER_API ObserverSnapshot operator_observer_snapshot();

// Clears stats and kept events, keeping the observer installed. Thread-safe.
TSARCHIVE_OBSERVER_API void reset_operator_observer();

// Tags operator events on this thread (and in at::launch tasks it starts)
// with a model id while it lives; guards nest, the innermost wins. Uses
// c10::DebugInfoKind::PRODUCER_INFO, the kind libtorch reserves for the
// host program: a program that sets its own PRODUCER_INFO info hides the
// model id inside it (and vice versa). Destroy on the thread that made it.
class TSARCHIVE_OBSERVER_API ModelIdGuard {
 public:
  explicit ModelIdGuard(const std::string& model_id);
  ~ModelIdGuard();
  ModelIdGuard(const ModelIdGuard&) = delete;
  ModelIdGuard& operator=(const ModelIdGuard&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The model id of the innermost ModelIdGuard on this thread; "" when none.
TSARCHIVE_OBSERVER_API std::string current_model_id();

// c10::SetAPIUsageLogger: records the API usage keys libtorch fires
// ("torch.script.load", "torch.graph_executor.run", ...; each once per
// process), and passes each to `also` when given. Install before the work
// you want to see; keys fired before are not reported again.
TSARCHIVE_OBSERVER_API void install_api_usage_logger(std::function<void(const std::string&)> also = {});

// The keys fired since install_api_usage_logger(), in the order they fired.
TSARCHIVE_OBSERVER_API std::vector<std::string> api_usage_keys();

}  // namespace tsarchive
