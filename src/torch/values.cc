// The torch layer's shared value handling (values.h): dtypes, HostValue ->
// IValue by the schema, argument lists, value descriptions, comparisons and
// serialized copies. Moved out of run.cc unchanged, for run and the JIT
// commands.
#include "values.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <sstream>

#include "torch_errors.h"
#include "base/error.h"
#include "contract/host_value.h"
#include "core/inputs/input_values.h"
#include "contract/run.h"

namespace tsarchive::torch_layer {
namespace {


// --- dtypes ------------------------------------------------------------------

struct DtypeName {
  const char* name;
  c10::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"float32", c10::ScalarType::Float},          {"float64", c10::ScalarType::Double},
    {"float16", c10::ScalarType::Half},           {"bfloat16", c10::ScalarType::BFloat16},
    {"int64", c10::ScalarType::Long},             {"int32", c10::ScalarType::Int},
    {"int16", c10::ScalarType::Short},            {"int8", c10::ScalarType::Char},
    {"uint8", c10::ScalarType::Byte},             {"bool", c10::ScalarType::Bool},
    {"complex32", c10::ScalarType::ComplexHalf},  {"complex64", c10::ScalarType::ComplexFloat},
    {"complex128", c10::ScalarType::ComplexDouble}, {"qint8", c10::ScalarType::QInt8},
    {"quint8", c10::ScalarType::QUInt8},          {"qint32", c10::ScalarType::QInt32},
};

c10::ScalarType scalar_type_of(const std::string& dtype, const std::string& origin) {
  for (const DtypeName& d : kDtypes) {
    if (dtype == d.name) return d.type;
  }
  throw Error(ErrorKind::BadInput, "dtype " + dtype + " cannot be made into a tensor here", origin);
}

std::string dtype_name(c10::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (type == d.type) return d.name;
  }
  return c10::toString(type);
}

// --- HostValue -> IValue -----------------------------------------------------

torch::Tensor make_tensor(const HostTensor& host, const std::string& origin) {
  const c10::ScalarType type = scalar_type_of(host.dtype, origin);
  const auto options = torch::TensorOptions().dtype(type);
  if (!host.bytes || host.bytes->empty()) {  // no elements (the core checked the view against the bytes)
    return torch::empty_strided(host.shape, host.stride, options);
  }
  const int64_t element = static_cast<int64_t>(c10::elementSize(type));
  const int64_t storage_numel = static_cast<int64_t>(host.bytes->size()) / element;
  // A view over the bytes the core read, as torch.load's tensors are views
  // over their storages (and torch.from_numpy's over an array): no copy, so
  // an input takes its own size in the worker, not that again laid out
  // contiguously (and a broadcast view, stride 0, is not materialized at
  // all: a model that makes it contiguous pays for that under
  // --memory-limit). The tensor holds the bytes alive; a model that writes
  // into its input writes into them, which nothing reads afterwards.
  std::shared_ptr<const std::string> bytes = host.bytes;
  void* data = const_cast<char*>(bytes->data());
  const torch::Tensor storage = torch::from_blob(data, {storage_numel}, [bytes](void*) mutable { bytes.reset(); }, options);
  return storage.as_strided(host.shape, host.stride, host.offset);
}

torch::Tensor generate_tensor(const TensorSpec& spec, const std::string& origin) {
  const c10::ScalarType type = scalar_type_of(spec.dtype, origin);
  const auto options = torch::TensorOptions().dtype(type);
  const auto float_options = torch::TensorOptions().dtype(torch::kFloat);
  const bool reduced = type == c10::ScalarType::Half || type == c10::ScalarType::BFloat16;
  switch (spec.fill) {
    case TensorFill::Normal:
      // float32/float64 draws match Python's torch.randn(shape, dtype=...) for the same seed.
      return reduced ? torch::randn(spec.shape, float_options).to(type) : torch::randn(spec.shape, options);
    case TensorFill::Uniform:
      return reduced ? torch::rand(spec.shape, float_options).to(type) : torch::rand(spec.shape, options);
    case TensorFill::Zeros: return torch::zeros(spec.shape, options);
    case TensorFill::Ones: return torch::ones(spec.shape, options);
    case TensorFill::Full: return torch::full(spec.shape, spec.full_value, options);
    case TensorFill::Range: {
      int64_t numel = 1;
      for (int64_t d : spec.shape) numel *= d;
      return torch::arange(numel, options).reshape(spec.shape);
    }
    case TensorFill::RandInt:
      if (type == c10::ScalarType::Bool) return torch::randint(spec.low, spec.high, spec.shape).to(torch::kBool);
      return torch::randint(spec.low, spec.high, spec.shape, options);
  }
  return torch::zeros(spec.shape, options);
}

bool is_sequence_type(const c10::TypePtr& type) {
  if (const auto opt = type->cast<c10::OptionalType>()) return is_sequence_type(opt->getElementType());
  return type->kind() == c10::TypeKind::ListType || type->kind() == c10::TypeKind::TupleType;
}

class Converter {
 public:
  Converter(std::string method, std::string file) : method_(std::move(method)), file_(std::move(file)) {}

  // By the schema's type for parameter `name`. A null type (a .ptl saved
  // without schemas) converts by the value's own kind.
  c10::IValue convert(const HostValue& v, const c10::TypePtr& type, const std::string& name) const {
    if (!type || type->kind() == c10::TypeKind::AnyType) return natural(v, name);
    if (const auto opt = type->cast<c10::OptionalType>()) {
      return v.kind == HostValue::Kind::None ? c10::IValue() : convert(v, opt->getElementType(), name);
    }
    switch (type->kind()) {
      case c10::TypeKind::TensorType:
        if (v.kind == HostValue::Kind::Tensor) return make_tensor(v.tensor, v.origin);
        if (v.kind == HostValue::Kind::Spec) return generate_tensor(v.spec, v.origin);
        if (v.kind == HostValue::Kind::String) return generate_tensor(parse_spec_for(v, name), v.origin);
        break;
      case c10::TypeKind::IntType:
        if (v.kind == HostValue::Kind::Int) return v.integer;
        break;
      case c10::TypeKind::FloatType:
        if (v.kind == HostValue::Kind::Float) return v.real;
        if (v.kind == HostValue::Kind::Int) return static_cast<double>(v.integer);
        break;
      case c10::TypeKind::NumberType:
        if (v.kind == HostValue::Kind::Int) return v.integer;
        if (v.kind == HostValue::Kind::Float) return v.real;
        if (v.kind == HostValue::Kind::Bool) return v.boolean;
        break;
      case c10::TypeKind::BoolType:
        if (v.kind == HostValue::Kind::Bool) return v.boolean;
        break;
      case c10::TypeKind::StringType:
        if (v.kind == HostValue::Kind::String) return v.string;
        break;
      case c10::TypeKind::NoneType:
        if (v.kind == HostValue::Kind::None) return c10::IValue();
        break;
      case c10::TypeKind::ListType:
        if (v.kind == HostValue::Kind::List) {
          const c10::TypePtr element = type->expectRef<c10::ListType>().getElementType();
          c10::impl::GenericList list(element);
          for (size_t i = 0; i < v.items.size(); ++i) list.push_back(convert(v.items[i], element, name + "[" + std::to_string(i) + "]"));
          return list;
        }
        break;
      case c10::TypeKind::TupleType:
        if (v.kind == HostValue::Kind::List) {
          const auto& elements = type->expectRef<c10::TupleType>().elements();
          if (elements.size() != v.items.size()) {
            fail(name, "a tuple of " + std::to_string(elements.size()) + " values", std::to_string(v.items.size()) + " values", v);
          }
          std::vector<c10::IValue> items;
          for (size_t i = 0; i < elements.size(); ++i) items.push_back(convert(v.items[i], elements[i], name + "[" + std::to_string(i) + "]"));
          return c10::ivalue::Tuple::create(std::move(items));
        }
        break;
      case c10::TypeKind::DictType:
        if (v.kind == HostValue::Kind::Dict) {
          const auto& dict_type = type->expectRef<c10::DictType>();
          c10::impl::GenericDict dict(dict_type.getKeyType(), dict_type.getValueType());
          for (const auto& [key, value] : v.entries) {
            dict.insert_or_assign(dict_key(key, dict_type.getKeyType(), name), convert(value, dict_type.getValueType(), name + "[\"" + key + "\"]"));
          }
          return dict;
        }
        break;
      default:
        throw Error(ErrorKind::Usage,
                    method_ + " parameter '" + name + "' has type " + type->annotation_str() + ", which cannot be given on the command line",
                    file_);
    }
    fail(name, type->annotation_str(), kind_text(v), v);
  }

 private:
  // No schema: tensors stay tensors, containers become tuples and dicts of str.
  c10::IValue natural(const HostValue& v, const std::string& name) const {
    switch (v.kind) {
      case HostValue::Kind::None: return c10::IValue();
      case HostValue::Kind::Bool: return v.boolean;
      case HostValue::Kind::Int: return v.integer;
      case HostValue::Kind::Float: return v.real;
      case HostValue::Kind::String: return v.string;
      case HostValue::Kind::Spec: return generate_tensor(v.spec, v.origin);
      case HostValue::Kind::Tensor: return make_tensor(v.tensor, v.origin);
      case HostValue::Kind::List: {
        std::vector<c10::IValue> items;
        for (size_t i = 0; i < v.items.size(); ++i) items.push_back(natural(v.items[i], name + "[" + std::to_string(i) + "]"));
        return c10::ivalue::Tuple::create(std::move(items));
      }
      case HostValue::Kind::Dict: {
        c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
        for (const auto& [key, value] : v.entries) dict.insert_or_assign(key, natural(value, name + "[\"" + key + "\"]"));
        return dict;
      }
    }
    return c10::IValue();
  }

  TensorSpec parse_spec_for(const HostValue& v, const std::string& name) const {
    try {
      return parse_tensor_spec(v.string);
    } catch (const Error& e) {
      throw Error(ErrorKind::Usage, method_ + " parameter '" + name + "' wants a Tensor: " + e.what(), file_, e.hint());
    }
  }

  c10::IValue dict_key(const std::string& key, const c10::TypePtr& type, const std::string& name) const {
    if (type->kind() == c10::TypeKind::StringType) return key;
    if (type->kind() == c10::TypeKind::IntType) {
      try {
        size_t used = 0;
        const long long k = std::stoll(key, &used);
        if (used == key.size()) return static_cast<int64_t>(k);
      } catch (const std::exception&) {
      }
    }
    throw Error(ErrorKind::Usage, method_ + " parameter '" + name + "' has key type " + type->annotation_str() +
                                      ", which the key \"" + key.substr(0, 40) + "\" is not", file_);
  }

  static std::string kind_text(const HostValue& v) {
    switch (v.kind) {
      case HostValue::Kind::None: return "null";
      case HostValue::Kind::Bool: return "a bool";
      case HostValue::Kind::Int: return "an int";
      case HostValue::Kind::Float: return "a float";
      case HostValue::Kind::String: return "a string";
      case HostValue::Kind::List: return "a list";
      case HostValue::Kind::Dict: return "an object";
      case HostValue::Kind::Spec:
      case HostValue::Kind::Tensor: return "a tensor";
    }
    return "a value";
  }

  [[noreturn]] void fail(const std::string& name, const std::string& wanted, const std::string& got, const HostValue& v) const {
    throw Error(ErrorKind::Usage, method_ + " parameter '" + name + "' wants " + wanted + ", but " +
                                      (v.origin.empty() ? std::string("the input") : v.origin) + " gives " + got,
                file_, wanted == "Tensor" ? "give tensors as SHAPE[:DTYPE[:FILL]] (e.g. 2x8), @x.npy or @x.pt, or inside "
                                            "json: as a spec string (json:\"2x8:float32:ones\")"
                                          : "give it as json:VALUE, e.g. --input 'json:2.0', --input 'json:[1, 2]'");
  }

  std::string method_;
  std::string file_;
};

}  // namespace

Arguments build_arguments(const LoadedModel& model, const RunRequest& request, int64_t batch) {
  const std::vector<Parameter> params = model.parameters();
  std::vector<HostValue> inputs;
  for (const HostValue& v : request.inputs) {
    const size_t at = inputs.size();
    const bool sequence_parameter = at < params.size() && params[at].type && is_sequence_type(params[at].type);
    // The argument tuple --save-inputs and --record write: one item per
    // parameter, so where the parameter is itself a list or tuple the first
    // item is one too (or None for an Optional one): ([1.5, 2.0],) for
    // List[float]. A tuple of plain values, (t1, t2), is the list itself.
    const auto argument_tuple = [&] {
      if (!v.tuple || v.items.empty() || v.items.size() > params.size() - at) return false;
      const HostValue& first = v.items.front();
      return first.kind == HostValue::Kind::List ||
             (first.kind == HostValue::Kind::None && params[at].type->kind() == c10::TypeKind::OptionalType);
    };
    const bool spread = v.spreads && v.kind == HostValue::Kind::List && (!sequence_parameter || argument_tuple());
    if (spread) {
      for (HostValue item : v.items) {
        if (item.origin.empty()) item.origin = v.origin;
        inputs.push_back(std::move(item));
      }
    } else {
      inputs.push_back(v);
    }
  }
  if (batch > 0) {
    for (HostValue& v : inputs) {
      if (v.kind != HostValue::Kind::Spec && v.kind != HostValue::Kind::Tensor) continue;
      if (v.kind == HostValue::Kind::Tensor || v.spec.shape.empty()) {
        throw Error(ErrorKind::Usage, "--batch-sizes changes the leading dimension of generated inputs, but " + v.origin +
                                          (v.kind == HostValue::Kind::Tensor ? " is read from a file" : " has none"),
                    request.display_name, "give tensor inputs as SHAPE specs, e.g. --input 1x3x224x224");
      }
      v.spec.shape[0] = batch;
    }
  }

  const std::string& file = request.display_name;
  if (model.has_schema() && inputs.size() > params.size()) {
    throw Error(ErrorKind::Usage, model.method() + " takes " + std::to_string(params.size()) +
                                      (params.size() == 1 ? " input, but " : " inputs, but ") + std::to_string(inputs.size()) +
                                      " were given",
                file, "it is declared as " + model.signature());
  }
  size_t required = 0;
  for (const Parameter& p : params) required += p.default_value ? 0 : 1;
  if (inputs.empty() && required > 0) {
    std::string needed;
    for (const Parameter& p : params) {
      if (p.default_value) continue;
      needed += (needed.empty() ? "" : ", ") + p.name + ": " + p.type->annotation_str();
    }
    throw Error(ErrorKind::Usage, model.method() + " needs " + std::to_string(required) + (required == 1 ? " input: " : " inputs: ") + needed, file,
                "give one --input per parameter in order, e.g. --input 1x3x224x224 for a Tensor, --input json:2.0 for "
                "a float; it is declared as " + model.signature());
  }

  seed_generators(request.seed, request.device);  // generated inputs are the same on every device and run
  Converter converter(model.method(), file);
  Arguments args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Parameter* p = i < params.size() ? &params[i] : nullptr;
    const std::string name = p ? p->name : "in[" + std::to_string(i) + "]";
    args.values.push_back(converter.convert(inputs[i], p ? p->type : nullptr, name));
    args.names.push_back(name);
  }
  args.given = args.values.size();
  for (size_t i = inputs.size(); i < params.size(); ++i) {
    if (!params[i].default_value) {
      throw Error(ErrorKind::Usage, model.method() + " needs a value for '" + params[i].name + "' (" +
                                        params[i].type->annotation_str() + ") after the " + std::to_string(inputs.size()) +
                                        " given",
                  file, "it is declared as " + model.signature());
    }
    args.values.push_back(*params[i].default_value);
    args.names.push_back(params[i].name);
  }
  return args;
}

void seed_generators(uint64_t seed, const std::string& device) {
  if (is_cuda_device(device)) {
    torch::manual_seed(seed);
    return;
  }
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(cpu.mutex());
  cpu.set_current_seed(seed);
}

c10::IValue to_device(const c10::IValue& v, const c10::Device& device) {
  if (v.isTensor()) return v.toTensor().to(device);
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& item : v.toTupleRef().elements()) items.push_back(to_device(item, device));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isList()) {
    c10::impl::GenericList list(v.toList().elementType());
    for (const c10::IValue& item : v.toListRef()) list.push_back(to_device(item, device));
    return list;
  }
  if (v.isGenericDict()) {
    const auto dict = v.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& e : dict) out.insert_or_assign(e.key(), to_device(e.value(), device));
    return out;
  }
  return v;
}

namespace {

// --- describing values ----------------------------------------------------------

// Elements of the Inputs and Outputs tables' statistics taken at once: each
// chunk is copied as float64 with its masks, so a tensor of any size needs
// about 16 MiB beside it, where the whole tensor as float64 and three masks
// took 3.5 times a float32 input's size (a 768 MB input passed 4 GiB).
constexpr int64_t kSummaryChunk = 1 << 20;

// Calls `chunk` on consecutive pieces of `t` of at most kSummaryChunk
// elements (more only where one element of dim 0 is that large on its own and
// dims are exhausted), in any order, covering every element once.
void for_each_chunk(const torch::Tensor& t, const std::function<void(const torch::Tensor&)>& chunk) {
  if (t.numel() <= kSummaryChunk || t.dim() == 0) return chunk(t);
  const int64_t rows = t.size(0);
  const int64_t per_row = t.numel() / rows;
  if (per_row >= kSummaryChunk) {
    for (int64_t i = 0; i < rows; ++i) for_each_chunk(t.select(0, i), chunk);
    return;
  }
  const int64_t step = kSummaryChunk / per_row;
  for (int64_t i = 0; i < rows; i += step) chunk(t.narrow(0, i, std::min(step, rows - i)));
}

// Count, mean and sum of squared deviations of the finite values seen so far,
// merged chunk by chunk (Chan et al.'s pairwise update), with NaN, Inf, min
// and max.
struct RunningStats {
  uint64_t nan = 0, inf = 0, n = 0;
  double mean = 0, m2 = 0;
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();

  void add(torch::Tensor c) {
    if (c.is_complex()) c = c.abs();
    c = c.to(torch::kDouble).reshape({-1});
    const uint64_t nan_here = static_cast<uint64_t>(torch::isnan(c).sum().item<int64_t>());
    const uint64_t inf_here = static_cast<uint64_t>(torch::isinf(c).sum().item<int64_t>());
    nan += nan_here;
    inf += inf_here;
    const torch::Tensor finite = nan_here + inf_here > 0 ? c.masked_select(torch::isfinite(c)) : c;
    const auto count = static_cast<uint64_t>(finite.numel());
    if (count == 0) return;
    min = std::min(min, finite.min().item<double>());
    max = std::max(max, finite.max().item<double>());
    const double chunk_mean = finite.mean().item<double>();
    const double chunk_m2 = (finite - chunk_mean).square().sum().item<double>();
    const double total = static_cast<double>(n + count);
    const double delta = chunk_mean - mean;
    mean += delta * static_cast<double>(count) / total;
    m2 += chunk_m2 + delta * delta * static_cast<double>(n) * static_cast<double>(count) / total;
    n += count;
  }
};

TensorSummary summarize_tensor(const torch::Tensor& tensor) {
  TensorSummary s;
  s.dtype = dtype_name(tensor.scalar_type());
  s.shape = tensor.sizes().vec();
  s.device = tensor.device().str();
  s.numel = static_cast<uint64_t>(tensor.numel());
  if (tensor.numel() == 0) return s;
  torch::Tensor v = tensor.detach();
  if (v.is_quantized()) v = v.dequantize();
  if (v.is_sparse() || v.layout() != torch::kStrided) v = v.to_dense();
  // A broadcast dimension (stride 0) repeats the same elements: read them
  // once and count them `repeats` times, so that a view of 2^42 elements
  // over 4 (an input read from a torch.save file) is summarized from 4.
  uint64_t repeats = 1;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (v.stride(d) != 0 || v.size(d) <= 1) continue;
    repeats *= static_cast<uint64_t>(v.size(d));
    v = v.narrow(d, 0, 1);
  }
  RunningStats stats;
  for_each_chunk(v, [&](const torch::Tensor& chunk) { stats.add(chunk); });
  s.nan = stats.nan * repeats;
  s.inf = stats.inf * repeats;
  if (stats.n == 0) return s;
  s.min = stats.min;
  s.max = stats.max;
  s.mean = stats.mean;
  const double n = static_cast<double>(stats.n) * static_cast<double>(repeats);
  if (n > 1) s.std = std::sqrt(stats.m2 * static_cast<double>(repeats) / (n - 1));  // unbiased, as Python's t.std()
  return s;
}

}  // namespace

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s.substr(0, 200)) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + (s.size() > 200 ? "...\"" : "\"");
}

}  // namespace

void describe(const c10::IValue& v, const std::string& path, int depth, std::vector<ValueSummary>& out) {
  ValueSummary s;
  s.path = path;
  s.depth = depth;
  const size_t at = out.size();
  out.push_back(s);
  ValueSummary& me = out[at];
  const auto count = [](size_t n) { return std::to_string(n) + (n == 1 ? " item" : " items"); };
  if (v.isTensor()) {
    me.type = "Tensor";
    if (!v.toTensor().defined()) {
      me.value = "undefined";
    } else {
      me.tensor = summarize_tensor(v.toTensor());
    }
  } else if (v.isTuple()) {
    const auto& items = v.toTupleRef().elements();
    me.type = "tuple";
    me.value = count(items.size());
    for (size_t i = 0; i < items.size(); ++i) describe(items[i], path + "[" + std::to_string(i) + "]", depth + 1, out);
  } else if (v.isList()) {
    const auto items = v.toListRef();
    out[at].type = "list";
    out[at].value = count(items.size());
    for (size_t i = 0; i < items.size(); ++i) describe(items[i], path + "[" + std::to_string(i) + "]", depth + 1, out);
  } else if (v.isGenericDict()) {
    const auto dict = v.toGenericDict();
    out[at].type = "dict";
    out[at].value = count(dict.size());
    for (const auto& e : dict) {
      const std::string key = e.key().isString() ? quoted(e.key().toStringRef())
                              : e.key().isInt()  ? std::to_string(e.key().toInt())
                                                 : "?";
      describe(e.value(), path + "[" + key + "]", depth + 1, out);
    }
  } else if (v.isObject()) {
    const auto& object = v.toObjectRef();
    const auto type = object.type();
    out[at].type = "object";
    out[at].class_name = type->name() ? type->name()->qualifiedName() : std::string("?");
    out[at].value = std::to_string(type->numAttributes()) + " attributes";
    for (size_t i = 0; i < type->numAttributes(); ++i) {
      describe(object.getSlot(i), path + "." + type->getAttributeName(i), depth + 1, out);
    }
  } else if (v.isInt()) {
    me.type = "int";
    me.value = std::to_string(v.toInt());
    me.integer = v.toInt();
  } else if (v.isDouble()) {
    me.type = "float";
    me.value = number_text(v.toDouble());
    me.real = v.toDouble();
  } else if (v.isBool()) {
    me.type = "bool";
    me.value = v.toBool() ? "true" : "false";
    me.boolean = v.toBool();
  } else if (v.isString()) {
    me.type = "str";
    me.value = quoted(v.toStringRef());
    me.text = v.toStringRef();
  } else if (v.isNone()) {
    me.type = "None";
  } else if (v.isComplexDouble()) {
    const auto c = v.toComplexDouble();
    me.type = "complex";
    me.value = number_text(c.real()) + (c.imag() < 0 ? "" : "+") + number_text(c.imag()) + "j";
  } else if (v.isDevice()) {
    me.type = "Device";
    me.value = v.toDevice().str();
  } else {
    me.type = v.tagKind();
  }
}

// --- comparing with expected outputs ----------------------------------------------

void leaves_of(const c10::IValue& v, const std::string& path, std::vector<Leaf>& out) {
  if (v.isTuple()) {
    const auto& items = v.toTupleRef().elements();
    for (size_t i = 0; i < items.size(); ++i) leaves_of(items[i], path + "[" + std::to_string(i) + "]", out);
  } else if (v.isList()) {
    const auto items = v.toListRef();
    for (size_t i = 0; i < items.size(); ++i) leaves_of(items[i], path + "[" + std::to_string(i) + "]", out);
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) {
      const std::string key = e.key().isString() ? quoted(e.key().toStringRef()) : e.key().isInt() ? std::to_string(e.key().toInt()) : "?";
      leaves_of(e.value(), path + "[" + key + "]", out);
    }
  } else if (v.isObject()) {
    const auto& object = v.toObjectRef();
    for (size_t i = 0; i < object.type()->numAttributes(); ++i) {
      leaves_of(object.getSlot(i), path + "." + object.type()->getAttributeName(i), out);
    }
  } else {
    out.push_back(Leaf{path, v});
  }
}

void host_leaves(const HostValue& v, std::vector<c10::IValue>& out) {
  switch (v.kind) {
    case HostValue::Kind::List:
      for (const HostValue& item : v.items) host_leaves(item, out);
      return;
    case HostValue::Kind::Dict:
      for (const auto& entry : v.entries) host_leaves(entry.second, out);
      return;
    case HostValue::Kind::Tensor: out.push_back(make_tensor(v.tensor, v.origin)); return;
    case HostValue::Kind::Spec: out.push_back(generate_tensor(v.spec, v.origin)); return;
    case HostValue::Kind::Int: out.push_back(v.integer); return;
    case HostValue::Kind::Float: out.push_back(v.real); return;
    case HostValue::Kind::Bool: out.push_back(v.boolean); return;
    case HostValue::Kind::String: out.push_back(v.string); return;
    case HostValue::Kind::None: out.push_back(c10::IValue()); return;
  }
}

namespace {

std::vector<int64_t> unravel(int64_t flat, const c10::IntArrayRef& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    const int64_t d = std::max<int64_t>(shape[i], 1);
    index[i] = flat % d;
    flat /= d;
  }
  return index;
}

void compare_tensors(const torch::Tensor& actual_in, const torch::Tensor& expected_in, OutputCheck& check) {
  torch::Tensor a = actual_in.detach().to(torch::kCPU);
  torch::Tensor e = expected_in.detach().to(torch::kCPU);
  if (a.is_quantized()) a = a.dequantize();
  if (e.is_quantized()) e = e.dequantize();
  if (a.sizes() != e.sizes()) {
    std::ostringstream s;
    s << "shape " << a.sizes() << " but expected " << e.sizes();
    check.problem = s.str();
    return;
  }
  check.elements = static_cast<uint64_t>(a.numel());
  if (a.numel() == 0) {
    check.passed = true;
    return;
  }
  const bool complex = a.is_complex() || e.is_complex();
  a = a.to(complex ? torch::kComplexDouble : torch::kDouble);
  e = e.to(complex ? torch::kComplexDouble : torch::kDouble);
  const torch::Tensor diff = (a - e).abs();
  if (check.tolerance.scaled && !complex) {
    const torch::Tensor magnitude = torch::where(torch::isfinite(e), e.abs(), torch::zeros_like(e));
    check.tolerance.atol *= std::max(1.0, magnitude.max().item<double>());
  }
  const torch::Tensor tol = check.tolerance.atol + check.tolerance.rtol * e.abs();
  const torch::Tensor same = (a == e) | (torch::isnan(a) & torch::isnan(e));  // inf == inf; NaN where expected NaN
  const torch::Tensor bad = ~same & ~(diff <= tol);
  check.mismatched = static_cast<uint64_t>(bad.sum().item<int64_t>());
  check.passed = check.mismatched == 0;

  const torch::Tensor finite_diff = torch::where(torch::isfinite(diff), diff, torch::zeros_like(diff));
  check.max_abs_error = finite_diff.max().item<double>();
  const torch::Tensor rel = torch::where(e.abs() > 0, finite_diff / e.abs(), torch::zeros_like(diff));
  check.max_rel_error = torch::where(torch::isfinite(rel), rel, torch::zeros_like(rel)).max().item<double>();
  // The worst element: the mismatch furthest outside its tolerance (NaN and
  // infinity first), or else the largest difference.
  const double inf = std::numeric_limits<double>::infinity();
  const torch::Tensor excess = torch::where(torch::isfinite(diff), diff - tol, torch::full_like(diff, inf));
  const torch::Tensor score = check.passed ? finite_diff : torch::where(bad, excess, torch::full_like(diff, -inf));
  const int64_t worst = score.reshape({-1}).argmax().item<int64_t>();
  check.worst_index = unravel(worst, a.sizes());
  if (!complex) {
    check.actual = a.reshape({-1})[worst].item<double>();
    check.expected = e.reshape({-1})[worst].item<double>();
  }
}

void compare_scalars(const c10::IValue& a, const c10::IValue& e, OutputCheck& check) {
  check.elements = 1;
  const auto numeric = [](const c10::IValue& v) { return v.isInt() || v.isDouble() || v.isBool(); };
  const auto value = [](const c10::IValue& v) {
    return v.isInt() ? static_cast<double>(v.toInt()) : v.isDouble() ? v.toDouble() : v.toBool() ? 1.0 : 0.0;
  };
  if (numeric(a) && numeric(e)) {
    const double x = value(a), y = value(e);
    check.actual = x;
    check.expected = y;
    check.max_abs_error = std::isfinite(x - y) ? std::fabs(x - y) : 0;
    check.passed = x == y || (std::isnan(x) && std::isnan(y)) ||
                   std::fabs(x - y) <= check.tolerance.atol + check.tolerance.rtol * std::fabs(y);
  } else if (a.isString() && e.isString()) {
    check.passed = a.toStringRef() == e.toStringRef();
    if (!check.passed) check.problem = quoted(a.toStringRef()) + " but expected " + quoted(e.toStringRef());
    return;
  } else if (a.isNone() && e.isNone()) {
    check.passed = true;
  } else {
    check.problem = std::string(a.tagKind()) + " but expected " + e.tagKind();
    return;
  }
  if (!check.passed) check.mismatched = 1;
}

}  // namespace

namespace {

std::vector<OutputCheck> compare_leaves(const c10::IValue& output, const std::vector<c10::IValue>& expected,
                                        const RunRequest& request) {
  std::vector<Leaf> actual;
  leaves_of(output, "out", actual);
  std::vector<OutputCheck> checks;
  for (size_t i = 0; i < std::max(actual.size(), expected.size()); ++i) {
    OutputCheck check;
    check.path = i < actual.size() ? actual[i].path : "out#" + std::to_string(i);
    const auto own = request.tolerance_by_path.find(check.path);
    check.tolerance = own != request.tolerance_by_path.end() ? own->second : request.tolerance;
    if (i >= actual.size()) {
      check.problem = "the model returned no value here, but one is expected";
    } else if (i >= expected.size()) {
      check.problem = "no expected value for this output";
    } else if (actual[i].value.isTensor() && expected[i].isTensor()) {
      compare_tensors(actual[i].value.toTensor(), expected[i].toTensor(), check);
    } else if (actual[i].value.isTensor() != expected[i].isTensor()) {
      check.problem = std::string(actual[i].value.isTensor() ? "a tensor" : actual[i].value.tagKind()) +
                      " but expected " + (expected[i].isTensor() ? "a tensor" : expected[i].tagKind());
    } else {
      compare_scalars(actual[i].value, expected[i], check);
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace

std::vector<OutputCheck> compare_outputs(const c10::IValue& output, const RunRequest& request) {
  std::vector<c10::IValue> expected;
  host_leaves(*request.expect, expected);
  return compare_leaves(output, expected, request);
}

std::vector<OutputCheck> compare_values(const c10::IValue& output, const c10::IValue& expected, const RunRequest& request) {
  std::vector<Leaf> leaves;
  leaves_of(expected, "out", leaves);
  std::vector<c10::IValue> values;
  for (Leaf& leaf : leaves) values.push_back(std::move(leaf.value));
  return compare_leaves(output, values, request);
}

// --- serialized inputs and outputs; tensors as plain data ------------------------

HostTensor host_tensor(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
  HostTensor h;
  h.dtype = dtype_name(t.scalar_type());
  h.shape = t.sizes().vec();
  h.stride = t.strides().vec();
  h.bytes = std::make_shared<const std::string>(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return h;
}

c10::IValue to_cpu(const c10::IValue& v) { return to_device(v, c10::Device(c10::kCPU)); }

namespace {

bool holds_object(const c10::IValue& v) {
  if (v.isObject()) return true;
  if (v.isTuple()) {
    for (const c10::IValue& item : v.toTupleRef().elements()) {
      if (holds_object(item)) return true;
    }
  } else if (v.isList()) {
    for (const c10::IValue& item : v.toListRef()) {
      if (holds_object(item)) return true;
    }
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) {
      if (holds_object(e.value())) return true;
    }
  }
  return false;
}

// TorchScript class objects as dicts of their attributes, in declaration
// order: what the core reads back from a torch.save file (it never
// instantiates classes), and the leaves run compares, in the same order.
c10::IValue objects_as_dicts(const c10::IValue& v) {
  if (v.isObject()) {
    const auto& object = v.toObjectRef();
    c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
    for (size_t i = 0; i < object.type()->numAttributes(); ++i) {
      dict.insert(object.type()->getAttributeName(i), objects_as_dicts(object.getSlot(i)));
    }
    return dict;
  }
  if (!holds_object(v)) return v;
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& item : v.toTupleRef().elements()) items.push_back(objects_as_dicts(item));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isList()) {
    c10::impl::GenericList list(c10::AnyType::get());
    for (const c10::IValue& item : v.toListRef()) list.push_back(objects_as_dicts(item));
    return list;
  }
  const auto source = v.toGenericDict();
  c10::impl::GenericDict dict(source.keyType(), c10::AnyType::get());
  for (const auto& e : source) dict.insert(e.key(), objects_as_dicts(e.value()));
  return dict;
}

}  // namespace

std::string serialize(const c10::IValue& value, SaveFormat format, const std::string& what, const std::string& file) {
  if (format == SaveFormat::Npy) {
    c10::IValue single = value;
    if (single.isTuple() && single.toTupleRef().elements().size() == 1) single = single.toTupleRef().elements()[0];
    if (!single.isTensor()) {
      throw Error(ErrorKind::Usage, "a .npy file holds one tensor, but the " + what + " are not a single tensor", file,
                  "save them as .pt (torch.save format) instead");
    }
    return write_npy(host_tensor(single.toTensor()));
  }
  const std::vector<char> bytes =
      torch_call(file, "serialize the " + what, [&] { return torch::jit::pickle_save(to_cpu(objects_as_dicts(value))); });
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace tsarchive::torch_layer
