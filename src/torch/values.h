// What `run` and the JIT commands (jit.cc) share in the torch layer: a module
// loaded for calling (TorchScript or lite interpreter), its method's
// parameters, the core's HostValues turned into IValues by the schema,
// values described as plain data (run.h), and outputs compared element by
// element with a tolerance.
#pragma once

#include <torch/csrc/jit/mobile/import.h>
#include <torch/csrc/jit/mobile/module.h>
#include <torch/script.h>

#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "torch_errors.h"
#include "base/edit_distance.h"
#include "base/error.h"
#include "contract/host_value.h"
#include "contract/run.h"

namespace tsarchive::torch_layer {


// --- the module and its method -----------------------------------------------

struct Parameter {
  std::string name;
  c10::TypePtr type;  // null: unknown (no schema)
  // c10::optional, not std::optional: IValue converts from a c10::optional
  // (an empty one becomes None), so a std::optional would always be engaged.
  c10::optional<c10::IValue> default_value;
};

// The lite interpreter's schemas hold DynamicTypes; their fallback is the
// ordinary type they stand for.
inline c10::TypePtr static_type(const c10::TypePtr& type) {
  if (type && type->kind() == c10::TypeKind::DynamicType) return type->expectRef<c10::DynamicType>().fallback();
  return type;
}

// A TorchScript module (torch::jit::load) or a lite-interpreter one
// (_load_for_mobile), behind one call.
class LoadedModel {
 public:
  // Not copied or moved: the selected method refers to the module it holds.
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;
  LoadedModel(const RunRequest& request, const c10::Device& device) : file_(request.display_name) {
    lite_ = request.lite;
    if (lite_) {
      mobile_ = torch_call(file_, "load the module (lite interpreter)",
                           [&] { return torch::jit::_load_for_mobile(request.archive, device); });
      if (every_module_has_training(*mobile_->_ivalue())) mobile_->eval();
    } else {
      module_ = torch_call(file_, "load the module", [&] { return torch::jit::load(request.archive, device); });
      saved_training_ = module_->hasattr("training") && module_->is_training();
      if (module_->hasattr("training")) module_->eval();
    }
  }

  std::vector<std::string> method_names() const {
    std::vector<std::string> names;
    if (module_) {
      for (const auto& m : module_->get_methods()) names.push_back(m.name());
    } else {
      for (const auto& m : mobile_->get_methods()) names.push_back(m.name());
    }
    return names;
  }

  // Selects the method; Error(Usage) naming the ones there are.
  void select(const std::string& name) {
    bool found = false;
    if (module_) {
      if (auto m = module_->find_method(name)) {
        const torch::jit::Method method = *m;
        call_ = [method](std::vector<c10::IValue> args) { return method(std::move(args)); };
        schema_ = method.function().getSchema();
        found = true;
      }
    } else if (auto m = mobile_->find_method(name)) {
      const torch::jit::mobile::Method method = *m;
      call_ = [method](std::vector<c10::IValue> args) { return method(std::move(args)); };
      if (method.function().hasSchema()) schema_ = method.function().getSchema();
      found = true;
    }
    if (!found) {
      std::string names;
      for (const std::string& n : method_names()) names += (names.empty() ? "" : ", ") + n;
      throw Error(ErrorKind::Usage, "the module has no method '" + name + "'", file_,
                  names.empty() ? std::string("it has no methods")
                                : did_you_mean(name, method_names()) + "its methods are: " + names);
    }
    method_ = name;
  }

  std::vector<Parameter> parameters() const {
    std::vector<Parameter> out;
    if (!schema_) return out;
    const auto& args = schema_->arguments();
    for (size_t i = 1; i < args.size(); ++i) {  // 0 is self
      Parameter p{args[i].name(), static_type(args[i].type()), args[i].default_value()};
      // Lite-interpreter bytecode stores "no default" as None; only an
      // Optional (or None, Any) parameter can really default to None.
      const c10::TypeKind kind = p.type->kind();
      if (p.default_value && p.default_value->isNone() && kind != c10::TypeKind::OptionalType &&
          kind != c10::TypeKind::NoneType && kind != c10::TypeKind::AnyType) {
        p.default_value = c10::nullopt;
      }
      out.push_back(std::move(p));
    }
    return out;
  }
  bool has_schema() const { return schema_.has_value(); }
  // What the method returns (one type per return; empty without a schema).
  std::vector<c10::TypePtr> return_types() const {
    std::vector<c10::TypePtr> types;
    if (schema_) {
      for (const auto& r : schema_->returns()) types.push_back(static_type(r.type()));
    }
    return types;
  }

  // forward(Tensor x, float scale=2.) -> Tensor, without self.
  std::string signature() const {
    if (!schema_) return method_ + "(...)  [saved without a schema]";
    std::ostringstream s;
    s << method_ << '(';
    bool first = true;
    for (const Parameter& p : parameters()) {
      s << (first ? "" : ", ") << p.type->annotation_str() << ' ' << p.name;
      if (p.default_value) s << '=' << *p.default_value;
      first = false;
    }
    s << ") -> ";
    const auto& returns = schema_->returns();
    if (returns.size() == 1) {
      s << static_type(returns[0].type())->annotation_str();
    } else {
      s << '(';
      for (size_t i = 0; i < returns.size(); ++i) s << (i ? ", " : "") << static_type(returns[i].type())->annotation_str();
      s << ')';
    }
    return s.str();
  }

  c10::IValue call(std::vector<c10::IValue> args) const { return call_(std::move(args)); }
  const std::string& method() const { return method_; }
  // The TorchScript module (null for a lite-interpreter one), in eval mode.
  torch::jit::Module* script_module() { return module_ ? &*module_ : nullptr; }
  // Whether the archive was saved in training mode (before eval()).
  bool saved_training() const { return saved_training_; }

 private:
  // mobile::Module::eval() recurses into every object attribute and is an
  // internal assert in libtorch 1.13 when one has no 'training' attribute:
  // optimize_for_mobile's archives hold XNNPACK contexts, and their code no
  // longer reads 'training' anyway.
  static bool every_module_has_training(const c10::ivalue::Object& object) {
    if (!object.type()->hasAttribute("training")) return false;
    for (const c10::IValue& slot : object.slots()) {
      if (slot.isObject() && !every_module_has_training(slot.toObjectRef())) return false;
    }
    return true;
  }

  std::string file_;
  bool lite_ = false;
  bool saved_training_ = false;
  std::optional<torch::jit::Module> module_;
  std::optional<torch::jit::mobile::Module> mobile_;
  std::function<c10::IValue(std::vector<c10::IValue>)> call_;
  std::optional<c10::FunctionSchema> schema_;
  std::string method_;
};

// The argument list for one call: inputs converted by the schema, a list
// read from a file spread over consecutive parameters, defaults after the
// last input. `batch` > 0 replaces the leading dimension of generated inputs.
struct Arguments {
  std::vector<c10::IValue> values;
  std::vector<std::string> names;
  size_t given = 0;  // values[0, given) came from the inputs; the rest are defaults
};


Arguments build_arguments(const LoadedModel& model, const RunRequest& request, int64_t batch);

// Seeds what generated inputs draw from (they are made on the CPU, then moved):
// the CPU generator, and for a run on CUDA torch::manual_seed's CUDA generators
// as well. torch::manual_seed asks CUDA for its devices even on a CPU run; on
// a GPU machine that starts the driver inside the worker's sandbox, where it
// cannot start (worker/sandbox.h), and libtorch warns about it.
void seed_generators(uint64_t seed, const std::string& device);
c10::IValue to_device(const c10::IValue& v, const c10::Device& device);

// "%.9g"
std::string number_text(double x);
// Appends `v` and what it holds to `out`, in walk order.
void describe(const c10::IValue& v, const std::string& path, int depth, std::vector<ValueSummary>& out);

// A value's leaves (tensors, scalars, strings) in walk order, with their
// paths: out, out[0], out[1]["boxes"], out.field.
struct Leaf {
  std::string path;
  c10::IValue value;
};
void leaves_of(const c10::IValue& v, const std::string& path, std::vector<Leaf>& out);

// A value's leaves (tensors made or generated, scalars, strings, None) in
// walk order: lists item by item, dicts value by value. Generated tensors
// draw from libtorch's current seed.
void host_leaves(const HostValue& v, std::vector<c10::IValue>& out);

// The output's leaves compared with request.expect's, in order.
std::vector<OutputCheck> compare_outputs(const c10::IValue& output, const RunRequest& request);
// The output's leaves compared with `expected`'s (another call's output), with
// request's tolerances.
std::vector<OutputCheck> compare_values(const c10::IValue& output, const c10::IValue& expected, const RunRequest& request);

// A tensor as plain data: on the CPU, contiguous, its bytes copied.
HostTensor host_tensor(const torch::Tensor& tensor);
c10::IValue to_cpu(const c10::IValue& v);

// torch.save format (Pt) or one tensor as .npy (Npy).
std::string serialize(const c10::IValue& value, SaveFormat format, const std::string& what, const std::string& file);

}  // namespace tsarchive::torch_layer
