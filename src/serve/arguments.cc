#include "serve/arguments.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "base/error.h"
#include "core/inputs/input_values.h"

namespace tsarchive::serve {

const std::vector<std::string> kReservedParameters = {
    "binary_data_output", "binary_data", "binary_data_size", "sequence_id", "sequence_start", "sequence_end",
    "priority", "timeout", "headers"};

namespace {

// What the spec strings of one request make in the worker, so far.
struct SpecTotals {
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

// "Optional[int]" -> "int".
std::string without_optional(const std::string& type) {
  if (starts_with(type, "Optional[") && type.back() == ']') return type.substr(9, type.size() - 10);
  return type;
}

// Element i of a contiguous tensor as a JSON-like value.
HostValue element(const HostTensor& t, uint64_t i, const std::string& what) {
  const char* at = t.bytes->data();
  const auto load = [&](auto sample) {
    decltype(sample) x;
    std::memcpy(&x, at + i * sizeof x, sizeof x);
    return x;
  };
  HostValue v;
  v.kind = HostValue::Kind::Int;
  if (t.dtype == "bool") {
    v.kind = HostValue::Kind::Bool;
    v.boolean = load(uint8_t{}) != 0;
  } else if (t.dtype == "int64") {
    v.integer = load(int64_t{});
  } else if (t.dtype == "int32") {
    v.integer = load(int32_t{});
  } else if (t.dtype == "int16") {
    v.integer = load(int16_t{});
  } else if (t.dtype == "int8") {
    v.integer = load(int8_t{});
  } else if (t.dtype == "uint8") {
    v.integer = load(uint8_t{});
  } else if (t.dtype == "float64") {
    v.kind = HostValue::Kind::Float;
    v.real = load(double{});
  } else if (t.dtype == "float32") {
    v.kind = HostValue::Kind::Float;
    v.real = load(float{});
  } else {
    throw ApiError(400, what + ": datatype " + datatype_of_dtype(t.dtype).value_or(t.dtype) +
                            " cannot give a non-tensor value; send BOOL, an integer datatype, FP32 or FP64");
  }
  return v;
}

// A non-tensor parameter given as an input tensor: one value for a scalar
// type, a list of values (a 1-D tensor) for a List or Tuple.
HostValue value_of_input(const ServedValue& p, const HostTensor& t) {
  const std::string what = "input '" + p.name + "' (" + p.type + ")";
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  if (n > kMaxValueElements) {
    throw ApiError(400, what + " holds " + std::to_string(n) + " values; a non-tensor parameter takes at most " +
                            std::to_string(kMaxValueElements));
  }
  const std::string type = without_optional(p.type);
  HostValue v;
  if (starts_with(type, "List[") || starts_with(type, "Tuple[")) {
    if (t.shape.size() != 1) {
      throw ApiError(400, what + " takes a 1-D tensor (shape [N]), not shape of " + std::to_string(t.shape.size()) +
                              " dimensions; or give it in the request's \"parameters\" as JSON");
    }
    v.kind = HostValue::Kind::List;
    for (uint64_t i = 0; i < n; ++i) v.items.push_back(element(t, i, what));
  } else {
    if (n != 1 || t.shape.size() > 1) {
      throw ApiError(400, what + " takes one value (shape [] or [1]); or give it in the request's \"parameters\" as JSON");
    }
    v = element(t, 0, what);
  }
  v.origin = "input '" + p.name + "'";
  return v;
}

// A string that reads as a tensor spec ("1x3:float32:ones"): where the
// parameter's type holds tensors, the worker generates that tensor from it.
std::optional<TensorSpec> spec_of(const HostValue& v) {
  if (v.kind != HostValue::Kind::String) return std::nullopt;
  try {
    return parse_tensor_spec(v.string);
  } catch (const Error&) {
    return std::nullopt;  // not a spec: the schema decides what it is
  }
}

// Whether a value holds a spec string anywhere inside it.
bool holds_spec(const HostValue& v) {
  return spec_of(v).has_value() || std::any_of(v.items.begin(), v.items.end(), holds_spec) ||
         std::any_of(v.entries.begin(), v.entries.end(), [](const auto& entry) { return holds_spec(entry.second); });
}

// Spec strings inside a value whose type holds tensors make tensors in the
// worker: their elements, over the whole request, are bounded here before it
// generates them (each spec alone under the bound is not enough: thirty of
// them would still take gigabytes), and their bytes added to `generated`.
void check_specs(const HostValue& v, const std::string& what, SpecTotals& generated) {
  if (const std::optional<TensorSpec> spec = spec_of(v)) {
    uint64_t n = 1;
    for (int64_t d : spec->shape) {
      n = d == 0 || n == 0 ? 0 : (n > kMaxSpecElements / static_cast<uint64_t>(d) ? kMaxSpecElements + 1 : n * static_cast<uint64_t>(d));
    }
    generated.elements += n;
    if (generated.elements > kMaxSpecElements) {
      throw ApiError(400, what + ": the tensor \"" + v.string.substr(0, 60) + "\" would take the tensors the request's "
                              "spec strings make past " + std::to_string(kMaxSpecElements) +
                              " elements in all; send large tensors as inputs");
    }
    // A dtype the protocol has no size for (complex) is counted at the largest, 16 bytes.
    const size_t size = element_size(spec->dtype);
    generated.bytes += n * (size != 0 ? size : 16);
  }
  for (const HostValue& item : v.items) check_specs(item, what, generated);
  for (const auto& entry : v.entries) check_specs(entry.second, what, generated);
}

// What the worker's messages name as where a value (and each value inside it) came from.
void set_origin(HostValue& v, const std::string& origin) {
  v.origin = origin;
  for (HostValue& item : v.items) set_origin(item, origin);
  for (auto& entry : v.entries) set_origin(entry.second, origin);
}

// A non-tensor parameter given in the request's "parameters".
HostValue value_of_parameter(const ServedValue& p, const nlohmann::ordered_json& json, SpecTotals& generated) {
  const std::string what = "parameter '" + p.name + "' (" + p.type + ")";
  HostValue v;
  try {
    v = host_value_of_json(json);
  } catch (const Error& e) {
    throw ApiError(400, what + ": " + e.what());
  }
  if (p.type.find("Tensor") != std::string::npos) check_specs(v, what, generated);
  set_origin(v, "the request's parameter '" + p.name + "'");
  return v;
}

bool reserved(const std::string& key) {
  return key.rfind("triton_", 0) == 0 ||
         std::find(kReservedParameters.begin(), kReservedParameters.end(), key) != kReservedParameters.end();
}

bool same_value(const HostValue& a, const HostValue& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case HostValue::Kind::None: return true;
    case HostValue::Kind::Bool: return a.boolean == b.boolean;
    case HostValue::Kind::Int: return a.integer == b.integer;
    case HostValue::Kind::Float: return a.real == b.real;
    case HostValue::Kind::String: return a.string == b.string;
    case HostValue::Kind::List:
      return a.items.size() == b.items.size() &&
             std::equal(a.items.begin(), a.items.end(), b.items.begin(), same_value);
    case HostValue::Kind::Dict:
      return a.entries.size() == b.entries.size() &&
             std::equal(a.entries.begin(), a.entries.end(), b.entries.begin(),
                        [](const auto& x, const auto& y) { return x.first == y.first && same_value(x.second, y.second); });
    default: return false;  // tensors inside a value: never assumed equal
  }
}

HostValue tensor_value(HostTensor t) {
  HostValue v;
  v.kind = HostValue::Kind::Tensor;
  v.tensor = std::move(t);
  return v;
}

// Every input and every entry of the request's "parameters" names a
// parameter of the method, and a tensor one comes as an input.
void check_names(const std::string& model, const ServedModelInfo& info, const InferRequest& request,
                 const nlohmann::ordered_json* given_parameters, const std::string& expected) {
  const auto parameter = [&](const std::string& name) {
    return std::find_if(info.inputs.begin(), info.inputs.end(), [&](const ServedValue& v) { return v.name == name; });
  };
  for (const InferInput& in : request.inputs) {
    if (parameter(in.name) == info.inputs.end()) {
      throw ApiError(400, "model '" + model + "' has no input '" + in.name.substr(0, 100) + "'; it takes " + expected);
    }
  }
  if (given_parameters != nullptr) {
    for (auto it = given_parameters->begin(); it != given_parameters->end(); ++it) {
      if (reserved(it.key())) continue;
      const auto p = parameter(it.key());
      if (p == info.inputs.end()) {
        throw ApiError(400, "model '" + model + "' has no parameter '" + it.key().substr(0, 100) + "' (the request's "
                            "\"parameters\"); it takes " + expected);
      }
      if (p->type == "Tensor") {
        throw ApiError(400, "parameter '" + p->name + "' is a Tensor: send it in \"inputs\", not in the request's \"parameters\"");
      }
    }
  }
}

// The argument for parameter `v` from the input of its name: BYTES as a
// string (the schema decides whether one fits), a tensor as it is, anything
// else converted by the schema.
HostValue argument_of_input(const ServedValue& v, InferInput& in) {
  if (in.text) {
    if (without_optional(v.type) == "Tensor") {
      throw ApiError(400, "input '" + v.name + "' is a Tensor, which holds numbers: send it as a numeric datatype, not BYTES");
    }
    HostValue text;
    text.kind = HostValue::Kind::String;
    text.string = std::move(*in.text);
    text.origin = "input '" + v.name + "'";
    return text;
  }
  if (without_optional(v.type) == "Tensor") return tensor_value(std::move(in.tensor));
  return value_of_input(v, in.tensor);
}

}  // namespace


std::vector<HostValue> method_arguments(const std::string& model, const ServedModelInfo& info, InferRequest& request,
                                        uint64_t* spec_bytes) {
  std::vector<HostValue> arguments;
  SpecTotals generated;
  if (info.inputs.empty()) {  // no schema (a .ptl saved without one): the inputs in order
    for (InferInput& in : request.inputs) {
      if (in.text) throw ApiError(400, "input '" + in.name + "': BYTES needs a method with a schema; send tensors");
      arguments.push_back(tensor_value(std::move(in.tensor)));
    }
    return arguments;
  }
  std::string expected;
  for (const ServedValue& v : info.inputs) {
    expected += (expected.empty() ? "" : ", ") + v.name + (v.type == "Tensor" ? "" : " (" + v.type + ")");
  }
  const nlohmann::ordered_json* given_parameters = request.parameters.is_object() ? &request.parameters : nullptr;
  check_names(model, info, request, given_parameters, expected);
  size_t given = 0;
  for (const ServedValue& v : info.inputs) {
    const auto in = std::find_if(request.inputs.begin(), request.inputs.end(), [&](const InferInput& i) { return i.name == v.name; });
    const bool as_input = in != request.inputs.end();
    const bool as_parameter = v.type != "Tensor" && !reserved(v.name) && given_parameters != nullptr &&
                              given_parameters->contains(v.name);
    if (as_input && as_parameter) {
      throw ApiError(400, "parameter '" + v.name + "' is given both as an input and in the request's \"parameters\"; give it once");
    }
    if (!as_input && !as_parameter) {
      if (!v.has_default) {
        const std::string protocols = v.type != "Tensor" && reserved(v.name)
                                          ? " ('" + v.name + "' in the request's \"parameters\" is the protocol's: send it as an input)"
                                          : "";
        throw ApiError(400, (v.type == "Tensor" ? "input '" : "parameter '") + v.name + "' is missing; model '" + model +
                                "' takes " + expected + protocols);
      }
      break;
    }
    arguments.push_back(as_input ? argument_of_input(v, *in) : value_of_parameter(v, given_parameters->at(v.name), generated));
    ++given;
  }
  size_t offered = request.inputs.size();
  if (given_parameters != nullptr) {
    for (auto it = given_parameters->begin(); it != given_parameters->end(); ++it) offered += reserved(it.key()) ? 0 : 1;
  }
  if (given != offered) {
    throw ApiError(400, "parameters after one with a default that was left out cannot be given; model '" + model +
                            "' takes " + expected);
  }
  if (spec_bytes != nullptr) *spec_bytes = generated.bytes;
  return arguments;
}

std::vector<HostTensor> tensors_of(const std::vector<HostValue>& arguments) {
  std::vector<HostTensor> out;
  for (const HostValue& v : arguments) {
    if (v.kind == HostValue::Kind::Tensor) out.push_back(v.tensor);
  }
  return out;
}

bool same_non_tensors(const std::vector<HostValue>& a, const std::vector<HostValue>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool tensor = a[i].kind == HostValue::Kind::Tensor;
    if (tensor != (b[i].kind == HostValue::Kind::Tensor)) return false;
    // A spec string makes a tensor in the worker: one for the whole batch,
    // whose rows may then be split among the requests as if each had sent
    // its own. Such a request runs alone.
    if (!tensor && (holds_spec(a[i]) || holds_spec(b[i]) || !same_value(a[i], b[i]))) return false;
  }
  return true;
}

std::vector<HostValue> with_tensors(std::vector<HostValue> arguments, std::vector<HostTensor> tensors) {
  size_t next = 0;
  for (HostValue& v : arguments) {
    if (v.kind == HostValue::Kind::Tensor && next < tensors.size()) v.tensor = std::move(tensors[next++]);
  }
  return arguments;
}

}  // namespace tsarchive::serve
