// The operator observer and API usage logger (tsarchive/operator_observer.h).
//
// Only RecordFunction and debug-info headers: this unit is compiled into the
// torch layer and into the public libtsarchive_observer.so, and stays cheap
// to build.
//
// How a sampled call's self time stays exact: libtorch calls the sampled
// global callback for a random 1 in 1/P operator calls, independently, so
// the operators nested in a sampled one are mostly not seen by it. When the
// sampled callback starts a call and no frame is open on this thread, it
// enables a thread-local callback with probability 1 (the "shadow") that
// pushes and pops a frame for every call nested inside; each frame adds its
// duration to its parent's child time. When the outermost frame closes, the
// shadow is disabled again. (Each thread adds its shadow once and then only
// toggles it: at::disableCallback / reenableCallback cost ~30 ns against
// ~2 us for adding and removing one, which on a 10 us model at P = 0.01 was
// a 10% overhead. A disabled callback is never called; the shadows stay
// registered after the observer is removed.) Frames are matched to calls by
// the RecordFunction's address, which is stable from start to end; when both
// callbacks see the same call, the first start pushes, the other only marks
// it sampled, and the first end pops. At P = 1 every call is sampled and no
// shadow is needed. Nor is it for an operator that has shown itself a leaf
// (its shadowed sampled calls had no nested call): its self time is its
// duration, and skipping the switch halves the observer's cost on a small
// model (see LeafKnowledge).
#include "tsarchive/operator_observer.h"

#include <ATen/record_function.h>
#include <c10/util/Logging.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

namespace tsarchive {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* scope_name(at::RecordScope scope) {
  switch (scope) {
    case at::RecordScope::FUNCTION: return "function";
    case at::RecordScope::BACKWARD_FUNCTION: return "backward";
    case at::RecordScope::TORCHSCRIPT_FUNCTION: return "torchscript";
    case at::RecordScope::KERNEL_FUNCTION_DTYPE: return "kernel_dtype";
    case at::RecordScope::CUSTOM_CLASS: return "custom_class";
    case at::RecordScope::BUILD_FEATURE: return "build_feature";
    case at::RecordScope::LITE_INTERPRETER: return "lite_interpreter";
    case at::RecordScope::USER_SCOPE: return "user";
    case at::RecordScope::STATIC_RUNTIME_OP: return "static_runtime_op";
    case at::RecordScope::STATIC_RUNTIME_MODEL: return "static_runtime_model";
    default: return "other";
  }
}

void append_shape(const c10::IValue& v, std::string& out) {
  out += '[';
  if (v.isTensor() && v.toTensor().defined()) {
    const auto sizes = v.toTensor().sizes();
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(sizes[i]);
    }
  }
  out += ']';
}

// "[[1, 8], [16, 8], []]": one list per input, [] for what is not a tensor.
std::string shapes_of(const at::RecordFunction& fn) {
  std::string out = "[";
  const auto inputs = fn.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) out += ", ";
    append_shape(inputs[i], out);
  }
  return out + ']';
}

struct ModelIdInfo final : c10::DebugInfoBase {
  explicit ModelIdInfo(std::string model_id) : id(std::move(model_id)) {}
  std::string id;
};

struct Frame {
  const at::RecordFunction* fn = nullptr;
  int64_t start_ns = 0;
  int64_t child_ns = 0;
  bool sampled = false;
  bool shadowed = false;      // the shadow was on while it ran: every nested call was seen
  bool had_children = false;  // a nested call was seen
  std::string input_shapes;
};

// What the sampled calls of one operator have shown about calls nested in it.
struct LeafKnowledge {
  bool leaf = false;         // every shadowed call so far had none
  uint32_t since_check = 0;  // sampled calls timed without the shadow since the last shadowed one
};

// A leaf's sampled call is timed without the shadow (its self time is its
// duration), which saves the shadow's switching, ~2 us a stretch on libtorch
// 1.13; every kLeafRecheck-th sampled call of it is shadowed again, and one
// nested call seen makes it a non-leaf for good.
constexpr uint32_t kLeafRecheck = 32;

struct ThreadFrames {
  std::vector<Frame> stack;
  at::CallbackHandle shadow = at::INVALID_CALLBACK_HANDLE;  // added once per thread
  bool shadow_enabled = false;
  std::unordered_map<std::string, LeafKnowledge> leaves;  // by operator name
  std::string name;  // the name looked up in `leaves`: a buffer kept, so a lookup allocates nothing

  LeafKnowledge* find_leaf(const at::RecordFunction& fn) {
    name.assign(fn.name());
    const auto it = leaves.find(name);
    return it == leaves.end() ? nullptr : &it->second;
  }
};

thread_local ThreadFrames t_frames;

struct ObserverState {
  OperatorObserverOptions options;
  at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
  std::ofstream events_file;

  std::mutex mutex;  // guards what follows
  std::unordered_map<std::string, OperatorStats> stats;
  std::vector<OperatorEvent> events;
  uint64_t sampled_calls = 0;
  uint64_t dropped_events = 0;
};

// Set while installed. Callbacks read it without a lock: install and remove
// happen only while no operator runs (the note's rule for addGlobalCallback).
ObserverState* g_state = nullptr;

void mark_sampled(Frame& frame, const at::RecordFunction& fn, const ObserverState& state) {
  frame.sampled = true;
  if (state.options.record_shapes && fn.needsInputs()) frame.input_shapes = shapes_of(fn);
}

std::unique_ptr<at::ObserverContext> on_shadow_start(const at::RecordFunction& fn);
void on_end(const at::RecordFunction& fn, at::ObserverContext*);

// Whether a sampled call that starts a stretch (no frame open) needs the
// shadow: not for a known leaf, but for every kLeafRecheck-th call of it.
// A sampled call nested in an open frame always does.
bool needs_shadow(ThreadFrames& frames, const at::RecordFunction& fn) {
  if (!frames.stack.empty()) return true;
  LeafKnowledge* known = frames.find_leaf(fn);
  if (known == nullptr || !known->leaf) return true;
  if (++known->since_check < kLeafRecheck) return false;
  known->since_check = 0;
  return true;
}

// What a sampled call that ended says of its operator (see LeafKnowledge).
void learn_leaf(ThreadFrames& frames, const at::RecordFunction& fn, const Frame& frame) {
  if (!frame.shadowed && !frame.had_children) return;  // timed alone: nothing learnt
  if (LeafKnowledge* known = frames.find_leaf(fn)) {
    known->leaf = known->leaf && !frame.had_children;
  } else {
    frames.leaves[frames.name].leaf = !frame.had_children;
  }
}

std::unique_ptr<at::ObserverContext> on_sampled_start(const at::RecordFunction& fn) {
  ObserverState* state = g_state;
  if (state == nullptr) return nullptr;
  ThreadFrames& frames = t_frames;
  if (!frames.stack.empty() && frames.stack.back().fn == &fn) {
    mark_sampled(frames.stack.back(), fn, *state);  // the shadow saw it first
    return nullptr;
  }
  if (state->options.sample < 1.0 && !frames.shadow_enabled && needs_shadow(frames, fn)) {
    if (frames.shadow == at::INVALID_CALLBACK_HANDLE) {
      frames.shadow = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_shadow_start, &on_end));
    } else {
      at::reenableCallback(frames.shadow);
    }
    frames.shadow_enabled = true;
  }
  Frame& frame = frames.stack.emplace_back();
  frame.fn = &fn;
  frame.shadowed = frames.shadow_enabled;
  mark_sampled(frame, fn, *state);
  frame.start_ns = now_ns();
  return nullptr;
}

std::unique_ptr<at::ObserverContext> on_shadow_start(const at::RecordFunction& fn) {
  ThreadFrames& frames = t_frames;
  // Empty: an at::launch task that inherited the shadow with the caller's
  // thread-local state; its calls are not nested in a sampled one here.
  if (frames.stack.empty() || frames.stack.back().fn == &fn) return nullptr;
  Frame& frame = frames.stack.emplace_back();
  frame.fn = &fn;
  frame.shadowed = true;
  frame.start_ns = now_ns();
  return nullptr;
}

void write_event_line(std::ofstream& file, const OperatorEvent& e) {
  nlohmann::ordered_json line = {{"name", e.name},          {"scope", e.scope},
                                 {"model_id", e.model_id},  {"thread", e.thread},
                                 {"start_ns", e.start_ns},  {"duration_ns", e.duration_ns},
                                 {"self_ns", e.self_ns}};
  if (!e.input_shapes.empty()) line["input_shapes"] = e.input_shapes;
  file << line.dump() << '\n';
  file.flush();
}

// The model id of the calling thread (ModelIdGuard), or empty; a reference
// valid while the guard that set it is alive, so the common case copies none.
const std::string& model_id_of_thread() {
  static const std::string kNone;
  const auto* info = dynamic_cast<const ModelIdInfo*>(c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PRODUCER_INFO));
  return info ? info->id : kNone;
}

// What one sampled call that ended adds to the statistics, and to the events
// where any are kept, written or handed on. The statistics' key is built in a
// buffer each thread reuses: a call of a known operator allocates nothing.
void record(ObserverState& state, const at::RecordFunction& fn, const Frame& frame, int64_t duration) {
  const char* name = fn.name();
  const char* scope = scope_name(fn.scope());
  const std::string& model_id = model_id_of_thread();
  const int64_t self = std::max<int64_t>(0, duration - frame.child_ns);
  thread_local std::string key;
  key.assign(model_id).append(1, '\0').append(scope).append(1, '\0').append(name).append(1, '\0').append(frame.input_shapes);
  const bool wants_events = state.events_file.is_open() || state.options.keep_events || state.options.on_event;
  std::optional<OperatorEvent> event;
  if (wants_events) {
    event.emplace();
    event->name = name;
    event->scope = scope;
    event->model_id = model_id;
    event->thread = at::RecordFunction::currentThreadId();
    event->start_ns = frame.start_ns;
    event->duration_ns = duration;
    event->self_ns = self;
    event->input_shapes = frame.input_shapes;
  }
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    ++state.sampled_calls;
    auto it = state.stats.find(key);
    if (it == state.stats.end()) {
      it = state.stats.emplace(key, OperatorStats{}).first;
      OperatorStats& s = it->second;
      s.name = name;
      s.scope = scope;
      s.model_id = model_id;
      s.input_shapes = frame.input_shapes;
      s.min_ns = duration;
    }
    OperatorStats& s = it->second;
    ++s.calls;
    s.total_ns += duration;
    s.self_ns += self;
    s.min_ns = std::min(s.min_ns, duration);
    s.max_ns = std::max(s.max_ns, duration);
    if (event && state.events_file.is_open()) write_event_line(state.events_file, *event);
    if (event && state.options.keep_events) {
      if (state.events.size() < state.options.max_events) {
        state.events.push_back(*event);
      } else {
        ++state.dropped_events;
      }
    }
  }
  if (event && state.options.on_event) state.options.on_event(*event);
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  const int64_t end = now_ns();
  ThreadFrames& frames = t_frames;
  if (frames.stack.empty() || frames.stack.back().fn != &fn) return;  // popped by the other callback
  Frame frame = std::move(frames.stack.back());
  frames.stack.pop_back();
  const int64_t duration = end - frame.start_ns;
  if (!frames.stack.empty()) {
    frames.stack.back().child_ns += duration;
    frames.stack.back().had_children = true;
  } else if (frames.shadow_enabled) {
    at::disableCallback(frames.shadow);
    frames.shadow_enabled = false;
  }
  ObserverState* state = g_state;
  if (!frame.sampled || state == nullptr) return;
  if (state->options.sample < 1.0) learn_leaf(frames, fn, frame);
  record(*state, fn, frame, duration);
}

std::mutex g_install_mutex;

struct ApiUsageLog {
  std::mutex mutex;
  std::vector<std::string> keys;
  std::function<void(const std::string&)> also;
};

ApiUsageLog& api_usage_log() {
  static ApiUsageLog* log = new ApiUsageLog;  // outlives libtorch's last call at exit
  return *log;
}

}  // namespace

void install_operator_observer(const OperatorObserverOptions& options) {
  if (!(options.sample > 0.0 && options.sample <= 1.0)) {
    throw std::invalid_argument("sampling probability " + std::to_string(options.sample) + " is not in (0, 1]");
  }
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_state != nullptr) throw std::logic_error("an operator observer is installed already");
  auto state = std::make_unique<ObserverState>();
  state->options = options;
  if (!options.events_file.empty()) {
    state->events_file.open(options.events_file, std::ios::app);
    if (!state->events_file) throw std::runtime_error("cannot open " + options.events_file + " for appending");
  }
  g_state = state.get();
  state->handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_sampled_start, &on_end)
                                            .needsInputs(options.record_shapes)
                                            .samplingProb(options.sample));
  state.release();
}

void remove_operator_observer() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_state == nullptr) return;
  at::removeCallback(g_state->handle);
  delete g_state;
  g_state = nullptr;
}

bool operator_observer_installed() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  return g_state != nullptr;
}

ObserverSnapshot operator_observer_snapshot() {
  std::lock_guard<std::mutex> install_lock(g_install_mutex);
  ObserverSnapshot snapshot;
  if (g_state == nullptr) return snapshot;
  ObserverState& state = *g_state;
  snapshot.sample = state.options.sample;
  snapshot.record_shapes = state.options.record_shapes;
  std::lock_guard<std::mutex> lock(state.mutex);
  snapshot.sampled_calls = state.sampled_calls;
  snapshot.dropped_events = state.dropped_events;
  snapshot.events = state.events;
  for (const auto& entry : state.stats) snapshot.operators.push_back(entry.second);
  std::sort(snapshot.operators.begin(), snapshot.operators.end(), [](const OperatorStats& a, const OperatorStats& b) {
    return std::tie(a.model_id, a.scope, a.name, a.input_shapes) < std::tie(b.model_id, b.scope, b.name, b.input_shapes);
  });
  return snapshot;
}

void reset_operator_observer() {
  std::lock_guard<std::mutex> install_lock(g_install_mutex);
  if (g_state == nullptr) return;
  std::lock_guard<std::mutex> lock(g_state->mutex);
  g_state->stats.clear();
  g_state->events.clear();
  g_state->sampled_calls = 0;
  g_state->dropped_events = 0;
}

struct ModelIdGuard::Impl {
  explicit Impl(const std::string& id)
      : guard(c10::DebugInfoKind::PRODUCER_INFO, std::make_shared<ModelIdInfo>(id)) {}
  c10::DebugInfoGuard guard;
};

ModelIdGuard::ModelIdGuard(const std::string& model_id) : impl_(std::make_unique<Impl>(model_id)) {}
ModelIdGuard::~ModelIdGuard() = default;

std::string current_model_id() { return model_id_of_thread(); }

void install_api_usage_logger(std::function<void(const std::string&)> also) {
  ApiUsageLog& log = api_usage_log();
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    log.also = std::move(also);
  }
  c10::SetAPIUsageLogger([](const std::string& key) {
    ApiUsageLog& keys = api_usage_log();
    std::function<void(const std::string&)> forward;
    {
      std::lock_guard<std::mutex> lock(keys.mutex);
      if (std::find(keys.keys.begin(), keys.keys.end(), key) == keys.keys.end()) keys.keys.push_back(key);
      forward = keys.also;
    }
    if (forward) forward(key);
  });
}

std::vector<std::string> api_usage_keys() {
  ApiUsageLog& log = api_usage_log();
  std::lock_guard<std::mutex> lock(log.mutex);
  return log.keys;
}

}  // namespace tsarchive
