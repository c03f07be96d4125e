// The JIT commands in the torch layer: `trace` and `convert` (one pipeline:
// eval -> trace -> freeze -> optimize -> save, then reload and compare) and
// `inspect --graph/--ops`. The module is loaded, its method selected and its
// inputs built exactly as `run` does (values.h), so the check inputs mean
// the same in both commands.
//
// Facts of libtorch 1.13 this relies on (tests/pytorch/check_jit.py checks them):
// - tracer::trace records a loaded scripted module's method when `self` is a
//   module whose attributes are the original's tensors: the tracer finds them
//   by identity and records GetAttr chains. We build that module (same
//   submodule tree, parameters and buffers, no code), so the traced archive
//   carries only the traced method.
// - optimize_for_inference's result saves, but does not load back
//   ("required keyword attribute 'value' is undefined") for convolutions:
//   the reload check catches it and nothing is written.
// - freeze requires eval mode; optimizeForMobile clones, evals, folds
//   conv+batchnorm and freezes by itself.
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/mobile/import.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/xnnpack_rewrite.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <set>
#include <sstream>

#include "base/edit_distance.h"
#include "export_hook.h"
#include "jit_module.h"
#include "torch_errors.h"
#include "base/error.h"
#include "contract/jit.h"
#include "values.h"

namespace tsarchive::torch_layer {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// --- graphs ---------------------------------------------------------------------

// The method's own graph (as Python's .graph shows it), or an inlined copy.
std::shared_ptr<Graph> method_graph(const torch::jit::Method& method, bool inlined) {
  if (!inlined) return method.graph();
  std::shared_ptr<Graph> graph = method.graph()->copy();
  torch::jit::Inline(*graph);
  return graph;
}

uint64_t count_nodes(const torch::jit::Block* block) {
  uint64_t n = 0;
  for (const Node* node : block->nodes()) {
    ++n;
    for (const torch::jit::Block* b : node->blocks()) n += count_nodes(b);
  }
  return n;
}

std::string source_of(const Node* node) {
  const auto where = node->sourceRange().file_line_col();
  if (!where) return {};
  return std::get<0>(*where) + ":" + std::to_string(std::get<1>(*where));
}

// What a control-flow condition depends on: nothing the caller gives, only
// the inputs' structure (shape, dtype, device, being None), or their values.
enum class Dependence { None = 0, Shape = 1, Values = 2 };

struct Reach {
  Dependence dependence = Dependence::None;
  std::string input;  // the method parameter reached
};

class DependenceScan {
 public:
  explicit DependenceScan(const Graph& graph) : graph_(graph) {}

  // The strongest dependence of `value` on the method's inputs (not self).
  Reach of(const Value* value) { return visit(value, false); }

 private:
  static bool structure_only(const Node* node) {
    const std::string kind = node->kind().toQualString();
    return kind == "aten::size" || kind == "aten::dim" || kind == "aten::len" || kind == "prim::shape" ||
           kind == "aten::numel" || kind == "prim::dtype" || kind == "prim::device" || kind == "aten::__is__" ||
           kind == "aten::__isnot__";
  }

  Reach visit(const Value* value, bool through_structure) {
    const auto key = std::make_pair(value, through_structure);
    if (const auto it = seen_.find(key); it != seen_.end()) return it->second;
    seen_[key] = Reach{};  // cycles through loop-carried values end here
    Reach result;
    const auto merge = [&result](const Reach& r) {
      if (r.dependence > result.dependence) result = r;
    };
    const Node* node = value->node();
    if (node->kind() == c10::prim::Param && node->owningBlock() == graph_.block()) {
      if (value->offset() > 0) {  // 0 is self
        const std::string name = value->debugNameBase();
        result = Reach{through_structure ? Dependence::Shape : Dependence::Values,
                       name.empty() ? "#" + std::to_string(value->offset()) : name};
      }
    } else if (node->kind() == c10::prim::Param) {
      // A block's parameters come from the node that owns the block.
      for (const Value* v : node->owningBlock()->owningNode()->inputs()) merge(visit(v, through_structure));
    } else {
      const bool structure = through_structure || structure_only(node);
      for (const Value* v : node->inputs()) merge(visit(v, structure));
      for (const torch::jit::Block* b : node->blocks()) {
        for (const Value* v : b->outputs()) merge(visit(v, structure));
      }
    }
    seen_[key] = result;
    return result;
  }

  const Graph& graph_;
  std::map<std::pair<const Value*, bool>, Reach> seen_;
};

// prim::If and prim::Loop whose condition or trip count depends on the
// method's inputs: a trace records one path through them. Those that depend
// on the values warn; those that depend on shapes only are counted (a trace
// holds for its example's shapes anyway).
void find_input_control_flow(const torch::jit::Block* block, DependenceScan& scan, std::vector<TraceWarning>& out,
                             std::vector<std::string>& shape_only) {
  for (const Node* node : block->nodes()) {
    const bool is_if = node->kind() == c10::prim::If;
    const bool is_loop = node->kind() == c10::prim::Loop;
    if (is_if || is_loop) {
      Reach reach = scan.of(node->input(0));  // If: the condition; Loop: the trip count
      if (is_loop) {
        for (const Value* v : {static_cast<const Value*>(node->input(1)), node->blocks()[0]->outputs()[0]}) {  // conditions
          const Reach cond = scan.of(v);
          if (cond.dependence > reach.dependence) reach = cond;
        }
      }
      const std::string where = source_of(node);
      const std::string what = std::string(is_if ? "a branch (prim::If" : "a loop (prim::Loop") +
                               (where.empty() ? "" : " at " + where) + ")";
      if (reach.dependence == Dependence::Values) {
        out.push_back(TraceWarning{"value-control-flow",
                                   what + (is_if ? " is chosen by" : " runs a number of times set by") +
                                       " the values of input '" + reach.input + "'; the trace recorded " +
                                       (is_if ? "the branch" : "the count") + " of the example input"});
      } else if (reach.dependence == Dependence::Shape) {
        shape_only.push_back(where.empty() ? what : where);
      }
    }
    for (const torch::jit::Block* b : node->blocks()) find_input_control_flow(b, scan, out, shape_only);
  }
}

std::vector<TraceWarning> control_flow_warnings(const torch::jit::Method& method, std::vector<std::string>& notes) {
  std::shared_ptr<Graph> graph = method_graph(method, true);
  torch::jit::ConstantPropagation(graph);  // branches on arguments left at their defaults go away
  DependenceScan scan(*graph);
  std::vector<TraceWarning> out;
  std::vector<std::string> shape_only;
  find_input_control_flow(graph->block(), scan, out, shape_only);
  if (!shape_only.empty()) {
    notes.push_back(std::to_string(shape_only.size()) + " branch(es) or loop(s) depend on input shapes only (first at " +
                    shape_only.front() + "): the trace holds for the example's shapes, as every trace does");
  }
  return out;
}

// --- trace ------------------------------------------------------------------------

// The original's submodule tree with the same parameters, buffers and other
// attributes (the same tensors and objects, so the tracer recognises them),
// and no methods.
torch::jit::Module attributes_only(const torch::jit::Module& original, const std::shared_ptr<torch::jit::CompilationUnit>& cu) {
  const c10::ClassTypePtr type = original.type();
  torch::jit::Module copy(type->name() ? *type->name() : c10::QualifiedName("__torch__.Traced"), cu, /*shouldMangle=*/true);
  for (size_t i = 0; i < type->numAttributes(); ++i) {
    const std::string& name = type->getAttributeName(i);
    const c10::IValue value = original._ivalue()->getSlot(i);
    const c10::TypePtr& attr_type = type->getAttribute(i);
    if (attr_type->is_module() && value.isObject()) {
      copy.register_module(name, attributes_only(torch::jit::Module(value.toObject()), cu));
    } else {
      copy.register_attribute(name, attr_type, value, type->is_parameter(i), type->is_buffer(i));
    }
  }
  return copy;
}

// `from`'s attribute values (not its submodules: their own, recursively) set
// on `to`, a module with the same attribute names: attributes_only's copy.
void restore_attributes(torch::jit::Module& to, const torch::jit::Module& from) {
  const c10::ClassTypePtr type = to.type();
  for (size_t i = 0; i < type->numAttributes(); ++i) {
    const std::string& name = type->getAttributeName(i);
    if (!from.hasattr(name)) continue;
    const c10::IValue value = from.attr(name);
    if (type->getAttribute(i)->is_module() && value.isObject()) {
      torch::jit::Module sub(to.attr(name).toObject());
      restore_attributes(sub, torch::jit::Module(value.toObject()));
    } else {
      to._ivalue()->setAttr(name, value);
    }
  }
}

torch::jit::Module trace_method(const torch::jit::Module& original, const std::string& method_name,
                                const std::vector<c10::IValue>& args, const std::vector<std::string>& names,
                                const std::string& file) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module traced = attributes_only(original, cu);
  torch::jit::Method method = original.get_method(method_name);
  const auto traced_fn = [&method](torch::jit::Stack inputs) -> torch::jit::Stack { return {method(std::move(inputs))}; };
  std::shared_ptr<torch::jit::tracer::TracingState> state;
  try {
    state = torch_call(file, "trace " + method_name, [&] {
      return torch::jit::tracer::trace(args, traced_fn, [](const torch::autograd::Variable&) { return std::string(); },
                                       /*strict=*/true, /*force_outplace=*/false, &traced, names)
          .first;
    });
  } catch (const Error& e) {
    torch::jit::tracer::abandon();
    // The tracer's own refusals name "traced functions" or "cannot be traced";
    // anything else (the model raised, an operator failed) keeps its hint.
    const std::string what = e.what();
    const bool refused = what.find("traced functions") != std::string::npos || what.find("cannot be traced") != std::string::npos;
    throw Error(ErrorKind::Torch, what, file,
                refused ? "nothing was written; a trace takes and returns tensors (or tuples, lists and dicts of them): "
                          "leave other parameters at their defaults, or convert the scripted archive without tracing it"
                        : "nothing was written" + (e.hint().empty() ? std::string() : "; " + e.hint()))
        .with_detail(e.detail());
  }
  torch_call(file, "trace " + method_name, [&] {
    torch::jit::Function* fn = cu->create_function(c10::QualifiedName(*traced.type()->name(), method_name), state->graph);
    traced.type()->addMethod(fn);
    return 0;
  });
  return traced;
}

// --- the state a call may change ------------------------------------------------------

// What a module's state is made of, by identity: every attribute's value,
// walked into objects, lists, dicts and tuples, each tensor's version counter
// (every in-place change bumps it; views share their base's) and the scalars
// containers hold. Equal fingerprints before and after a call mean the call
// changed no state a later call or a save would see. Nothing when part of the
// state is opaque (a C++ custom class, such as quantized packed weights; a
// tensor without a version counter): then nobody can tell. Writes through
// `.data` escape the version counter; the reload check's comparison still
// sees what they change.
using StateFingerprint = std::vector<int64_t>;

bool add_to_fingerprint(const c10::IValue& v, StateFingerprint& out, std::set<const void*>& seen) {
  const auto identity = [&out](const void* p) { out.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(p))); };
  // Each value's kind first, so that no two states of different shape read alike.
  enum Kind : int64_t { kNone, kTensor, kInt, kBool, kDouble, kPointer, kObject, kList, kDict, kTuple };
  const Kind kind = v.isNone()        ? kNone
                    : v.isTensor()    ? kTensor
                    : v.isInt()       ? kInt
                    : v.isBool()      ? kBool
                    : v.isDouble()    ? kDouble
                    : v.isObject()    ? kObject
                    : v.isList()      ? kList
                    : v.isGenericDict() ? kDict
                    : v.isTuple()     ? kTuple
                                      : kPointer;
  out.push_back(kind);
  if (v.isNone()) return true;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return true;
    if (t.is_inference()) return false;
    identity(t.unsafeGetTensorImpl());
    out.push_back(t._version());
    return true;
  }
  if (v.isInt()) return out.push_back(v.toInt()), true;
  if (v.isBool()) return out.push_back(v.toBool()), true;
  if (v.isDouble()) {
    const double d = v.toDouble();
    int64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    return out.push_back(bits), true;
  }
  if (v.isString() || v.isDevice()) return identity(v.internalToPointer()), true;
  const bool container = v.isObject() || v.isList() || v.isGenericDict() || v.isTuple();
  if (!container) return false;  // capsules, futures, blobs, ...
  identity(v.internalToPointer());
  if (!seen.insert(v.internalToPointer()).second) return true;
  if (v.isObject()) {
    const c10::intrusive_ptr<c10::ivalue::Object> object = v.toObject();
    out.push_back(static_cast<int64_t>(object->slots().size()));
    for (const c10::IValue& slot : object->slots()) {
      if (!add_to_fingerprint(slot, out, seen)) return false;
    }
  } else if (v.isList()) {
    const c10::List<c10::IValue> list = v.toList();
    out.push_back(static_cast<int64_t>(list.size()));
    // By index: the iterator's element type differs between libtorch 1.x and 2.x.
    for (size_t i = 0; i < list.size(); ++i) {
      if (!add_to_fingerprint(list.get(i), out, seen)) return false;
    }
  } else if (v.isGenericDict()) {
    const c10::Dict<c10::IValue, c10::IValue> dict = v.toGenericDict();
    out.push_back(static_cast<int64_t>(dict.size()));
    for (const auto& entry : dict) {
      if (!add_to_fingerprint(entry.key(), out, seen) || !add_to_fingerprint(entry.value(), out, seen)) return false;
    }
  } else {
    for (const c10::IValue& item : v.toTupleRef().elements()) {
      if (!add_to_fingerprint(item, out, seen)) return false;
    }
  }
  return true;
}

std::optional<StateFingerprint> state_fingerprint(const torch::jit::Module& module) {
  StateFingerprint out;
  std::set<const void*> seen;
  if (!add_to_fingerprint(module._ivalue(), out, seen)) return std::nullopt;
  return out;
}

// Whether the state `module` holds now is the one `before` fingerprinted.
bool state_unchanged(const std::optional<StateFingerprint>& before, const torch::jit::Module& module) {
  return before && before == state_fingerprint(module);
}

// --- save, reload, compare ----------------------------------------------------------

void save_with_stamp(const torch::jit::Module& module, const ConvertRequest& request) {
  install_stamp_hook([&request](const std::string&) { return request.stamp; });
  try {
    torch_call(request.source.display_name, request.lite ? "save the lite-interpreter archive" : "save the archive", [&] {
      if (request.lite) {
        module._save_for_mobile(request.output);
      } else {
        module.save(request.output);
      }
      return 0;
    });
  } catch (...) {
    remove_stamp_hook();
    throw;
  }
  remove_stamp_hook();
}

bool any_mismatch(const std::vector<OutputCheck>& checks) {
  return std::any_of(checks.begin(), checks.end(), [](const OutputCheck& c) { return !c.passed; });
}

Arguments arguments_with_seed(const LoadedModel& model, RunRequest request, uint64_t seed) {
  request.seed = seed;
  return build_arguments(model, request, 0);
}

// The arguments the user gave, without the defaults after them: what a
// traced method takes (the defaults are constants in its graph, as in a
// trace Python makes).
std::vector<c10::IValue> given_only(const Arguments& args) {
  return {args.values.begin(), args.values.begin() + static_cast<std::ptrdiff_t>(args.given)};
}

// The conversion passes the request asks for, in order. Every method the
// module (still) has is kept, the chosen one first, as Python's
// torch.jit.freeze(preserved_attrs=...) and
// optimize_for_mobile(preserved_methods=...) keep the methods named to them.
torch::jit::Module run_passes(torch::jit::Module module, const ConvertRequest& request, ConvertReport& report) {
  const RunRequest& source = request.source;
  const std::string& file = source.display_name;
  const bool freeze = (request.freeze || request.optimize_for_inference) && !request.optimize_for_mobile;
  std::vector<std::string> kept = {source.method};
  for (const torch::jit::Method& m : module.get_methods()) {
    if (m.name() != source.method) kept.push_back(m.name());
  }
  std::vector<std::string> not_forward;
  for (const std::string& name : kept) {
    if (name != "forward") not_forward.push_back(name);
  }
  if (freeze) {
    module = torch_call(file, "freeze the module", [&] { return torch::jit::freeze(module, kept); });
    report.steps.push_back(request.freeze ? "freeze" : "freeze (for optimize-for-inference)");
  }
  if (request.optimize_for_inference) {
    module = torch_call(file, "optimize for inference", [&] {
      return torch::jit::optimize_for_inference(module, not_forward);
    });
    report.steps.push_back("optimize-for-inference");
  }
  if (request.optimize_for_mobile) {
    module = torch_call(file, "optimize for mobile", [&] { return torch::jit::optimizeForMobile(module, {}, kept); });
    report.steps.push_back("optimize-for-mobile (folds conv+batchnorm, freezes, prepacks for XNNPACK)");
  }
  return module;
}

// The archive as written, into `reloaded`: loaded the way its users will
// load it. (In place: a LoadedModel's method refers to its module.)
void load_written(const ConvertRequest& request, ConvertReport& report, std::optional<LoadedModel>& reloaded) {
  const RunRequest& source = request.source;
  const std::string& file = source.display_name;
  RunRequest written = source;
  written.archive = request.output;
  written.lite = request.lite;
  report.reloaded_with = request.lite ? "torch::jit::_load_for_mobile" : "torch::jit::load";
  try {
    reloaded.emplace(written, c10::Device(c10::kCPU));
    reloaded->select(source.method);
  } catch (const Error& e) {
    throw Error(ErrorKind::Torch, std::string("the written archive does not load back: ") + e.what(), file,
                request.optimize_for_inference
                    ? "nothing was written; libtorch " TORCH_VERSION " writes optimize_for_inference results it cannot "
                      "load back (convolutions, here): use --freeze, or --mobile for phones"
                    : "nothing was written; run with --verbose for libtorch's message")
        .with_detail(e.detail());
  }
}

// A trace is exact on its example; on other inputs it may not be: compares
// the trace with the original on request.fresh_inputs fresh inputs.
void compare_on_fresh_inputs(const ConvertRequest& request, LoadedModel& original, LoadedModel& reloaded,
                             ConvertReport& report) {
  const RunRequest& source = request.source;
  const std::string& file = source.display_name;
  for (int k = 1; k <= request.fresh_inputs; ++k) {
    const Arguments fresh = torch_call(file, "make fresh inputs", [&] {
      return arguments_with_seed(original, source, source.seed + static_cast<uint64_t>(k));
    });
    const c10::IValue want = torch_call(file, "run " + source.method, [&] { return original.call(fresh.values); });
    const c10::IValue got =
        torch_call(file, "run the traced " + source.method, [&] { return reloaded.call(given_only(fresh)); });
    report.fresh_inputs += 1;
    if (any_mismatch(compare_values(got, want, source))) report.fresh_mismatches += 1;
  }
  if (report.fresh_mismatches > 0) {
    report.warnings.insert(report.warnings.begin(),
                           TraceWarning{"fresh-inputs", "the trace differs from the original on " +
                                                            std::to_string(report.fresh_mismatches) + " of " +
                                                            std::to_string(report.fresh_inputs) +
                                                            " fresh random inputs of the same shapes: it does not "
                                                            "generalise beyond the example input"});
  }
}

}  // namespace

ConvertReport convert_module(const ConvertRequest& request) {
  torch::NoGradGuard no_grad;
  const RunRequest& source = request.source;
  const std::string& file = source.display_name;
  ConvertReport report;
  report.libtorch_version = TORCH_VERSION;
  report.method = source.method;

  LoadedModel original(source, c10::Device(c10::kCPU));  // in eval mode, as run calls it
  original.select(source.method);
  report.schema = original.signature();
  if (original.script_module() == nullptr) {
    throw Error(ErrorKind::BadInput, "a lite-interpreter archive holds bytecode, not TorchScript to convert", file,
                "convert the .pt it was made from");
  }
  // A model that keeps state between calls (a streaming RNN's hidden state,
  // silero-vad's _state) changes its attributes on every call, and the check
  // run below must not be baked into the archive it checks: when a call
  // changed the state (or no one can tell), what is converted is loaded
  // again, with the state the file holds.
  std::list<LoadedModel> reloads;  // not moved: a LoadedModel's method refers to its module
  const auto load_again = [&]() -> torch::jit::Module {
    return *reloads.emplace_back(source, c10::Device(c10::kCPU)).script_module();
  };
  const std::optional<StateFingerprint> as_loaded = state_fingerprint(*original.script_module());
  const torch::jit::Method method = original.script_module()->get_method(source.method);
  for (const torch::jit::Method& m : original.script_module()->get_methods()) report.methods.push_back(m.name());
  report.nodes_before = count_nodes(method_graph(method, true)->block());

  Arguments args = torch_call(file, "make the inputs", [&] { return build_arguments(original, source, 0); });
  for (size_t i = 0; i < args.values.size(); ++i) describe(args.values[i], args.names[i], 0, report.inputs);
  const c10::IValue expected = torch_call(file, "run " + source.method, [&] { return original.call(args.values); });
  const bool unchanged = state_unchanged(as_loaded, *original.script_module());
  if (as_loaded && !unchanged) {
    report.notes.push_back("the model changes its own state when called (an attribute, or a tensor in place): what is "
                           "converted was loaded again, with the state the file holds, not the state the check run left");
  }
  torch::jit::Module module = unchanged ? *original.script_module() : torch_call(file, "load the module", load_again);

  // LoadedModel put the module in eval mode: the trace and every pass see it as deployment runs it.
  report.steps.push_back("eval");
  if (original.saved_training()) {
    report.notes.push_back("the archive was saved in training mode; it was converted in eval mode (BatchNorm uses its "
                           "running statistics, Dropout is off), as deployment runs it");
  }
  if (request.trace) {
    const std::vector<std::string> names(args.names.begin(), args.names.begin() + static_cast<std::ptrdiff_t>(args.given));
    // Tracing runs the method, on attributes the traced module shares: a
    // run that changed them is undone from the file's own state.
    const std::optional<StateFingerprint> untraced = state_fingerprint(module);
    torch::jit::Module traced = trace_method(module, source.method, given_only(args), names, file);  // names: the traced signature's
    if (!state_unchanged(untraced, module)) restore_attributes(traced, torch_call(file, "load the module", load_again));
    module = traced;
    report.steps.push_back("trace " + source.method);
    report.warnings = control_flow_warnings(method, report.notes);
  }
  module = run_passes(std::move(module), request, report);
  report.nodes_after = count_nodes(method_graph(module.get_method(source.method), true)->block());
  for (const std::string& name : report.methods) {
    if (!module.find_method(name)) report.dropped_methods.push_back(name);
  }

  save_with_stamp(module, request);
  report.steps.push_back(request.lite ? "save lite-interpreter (.ptl)" : "save TorchScript (.pt)");

  std::optional<LoadedModel> reloaded;
  load_written(request, report, reloaded);
  const std::vector<c10::IValue> call_args = request.trace ? given_only(args) : args.values;
  const c10::IValue actual = torch_call(file, "run " + source.method + " of the written archive",
                                        [&] { return reloaded->call(call_args); });
  describe(actual, "out", 0, report.outputs);
  report.checks = compare_values(actual, expected, source);

  if (request.trace && !any_mismatch(report.checks)) compare_on_fresh_inputs(request, original, *reloaded, report);
  return report;
}

MethodGraph graph_of(const GraphRequest& request) {
  const std::string& file = request.display_name;
  torch::jit::Module module = torch_call(file, "load the module", [&] { return torch::jit::load(request.archive, torch::kCPU); });
  const std::string name = request.method.empty() ? "forward" : request.method;
  const auto method = module.find_method(name);
  if (!method) {
    std::vector<std::string> list;
    for (const auto& m : module.get_methods()) list.push_back(m.name());
    std::string names;
    for (const std::string& n : list) names += (names.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::Usage, "the module has no method '" + name + "'", file,
                names.empty() ? std::string("it has no methods") : did_you_mean(name, list) + "its methods are: " + names);
  }
  MethodGraph out;
  out.method = name;
  std::ostringstream schema;
  schema << method->function().getSchema();
  out.schema = schema.str();
  out.inlined = request.inlined;
  const std::shared_ptr<Graph> graph = method_graph(*method, request.inlined);
  out.text = graph->toString();  // with source locations, as Python prints .graph

  std::map<const Value*, int> index;
  const auto value_index = [&](const Value* v) {
    const auto [it, added] = index.emplace(v, static_cast<int>(out.values.size()));
    if (added) out.values.push_back(GraphValue{"%" + v->debugName(), v->type()->annotation_str()});
    return it->second;
  };
  std::function<void(const torch::jit::Block*, int, int)> walk = [&](const torch::jit::Block* block, int parent, int which) {
    const auto add = [&](const Node* node) {
      GraphNode n;
      n.kind = node->kind().toQualString();
      n.parent = parent;
      n.block = which;
      n.source = source_of(node);
      if (node->kind() == c10::prim::Constant && node->outputs().size() == 1) {
        if (const auto v = torch::jit::toIValue(node->output())) {
          std::ostringstream s;
          s << *v;
          n.detail = s.str().substr(0, 40);
        }
      } else if (node->kind() == c10::prim::GetAttr) {
        n.detail = node->s(c10::attr::name);
      }
      for (const Value* v : node->inputs()) n.inputs.push_back(value_index(v));
      for (const Value* v : node->outputs()) n.outputs.push_back(value_index(v));
      out.nodes.push_back(std::move(n));
      return static_cast<int>(out.nodes.size()) - 1;
    };
    add(block->param_node());
    for (const Node* node : block->nodes()) {
      const int id = add(node);
      for (size_t b = 0; b < node->blocks().size(); ++b) walk(node->blocks()[b], id, static_cast<int>(b));
    }
    add(block->return_node());
  };
  walk(graph->block(), -1, 0);
  return out;
}

OpsReport operators_of(const GraphRequest& request) {
  const std::string& file = request.display_name;
  OpsReport report;
  if (request.lite) {
    torch::jit::mobile::Module module = torch_call(file, "load the module (lite interpreter)",
                                                   [&] { return torch::jit::_load_for_mobile(request.archive, torch::kCPU); });
    const std::set<std::string> ops = torch_call(file, "list the bytecode's operators",
                                                 [&] { return torch::jit::mobile::_export_operator_list(module); });
    report.operators.assign(ops.begin(), ops.end());
    report.source = "bytecode";
    return report;
  }
  torch::jit::Module module = torch_call(file, "load the module", [&] { return torch::jit::load(request.archive, torch::kCPU); });
  try {
    report.operators =
        torch_call(file, "list the operators with export_opnames", [&] { return torch::jit::export_opnames(module); });
    report.source = "export_opnames";
  } catch (const Error& e) {
    // export_opnames converts every method to mobile bytecode first, which
    // some modules (custom classes, unsupported types) cannot take; their
    // graphs still name every operator they call.
    std::set<std::string> ops;
    for (const torch::jit::Module& m : module.modules()) {
      for (const torch::jit::Method& method : m.get_methods()) {
        const std::shared_ptr<Graph> graph = method_graph(method, true);
        std::function<void(const torch::jit::Block*)> scan = [&](const torch::jit::Block* block) {
          for (const Node* node : block->nodes()) {
            if (const auto* schema = node->maybeSchema()) {
              ops.insert(schema->overload_name().empty() ? schema->name() : schema->name() + "." + schema->overload_name());
            }
            for (const torch::jit::Block* b : node->blocks()) scan(b);
            // prim::fork keeps the forked code in a subgraph, which Inline leaves alone.
            if (node->hasAttribute(c10::attr::Subgraph)) scan(node->g(c10::attr::Subgraph)->block());
          }
        };
        scan(graph->block());
      }
    }
    report.operators.assign(ops.begin(), ops.end());
    report.source = "graph scan";
    std::string why = e.what();  // "libtorch could not list the operators: FORK is not supported ..."
    while (!why.empty() && (why.back() == '.' || why.back() == ' ')) why.pop_back();
    report.notes.push_back(why + "; the operators were found by scanning the inlined graphs instead, which may list a "
                                 "few that bytecode would not call");
  }
  std::sort(report.operators.begin(), report.operators.end());
  report.operators.erase(std::unique(report.operators.begin(), report.operators.end()), report.operators.end());
  return report;
}

}  // namespace tsarchive::torch_layer
