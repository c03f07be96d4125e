#include "serve/v2.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "base/bounded_json.h"
#include "base/strings.h"
#include "format/byte_source.h"

namespace tsarchive::serve {
namespace {

struct Datatype {
  const char* v2;
  const char* dtype;
  size_t size;
};

constexpr Datatype kDatatypes[] = {
    {"BOOL", "bool", 1},     {"UINT8", "uint8", 1},     {"INT8", "int8", 1},       {"INT16", "int16", 2},
    {"INT32", "int32", 4},   {"INT64", "int64", 8},     {"FP16", "float16", 2},    {"BF16", "bfloat16", 2},
    {"FP32", "float32", 4},  {"FP64", "float64", 8},
};

const Datatype* by_v2(std::string_view name) {
  for (const Datatype& d : kDatatypes) {
    if (name == d.v2) return &d;
  }
  return nullptr;
}

const Datatype* by_dtype(std::string_view name) {
  for (const Datatype& d : kDatatypes) {
    if (name == d.dtype) return &d;
  }
  return nullptr;
}

// IEEE half from a float, rounding to nearest even; NaN stays NaN.
uint16_t to_half(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal or zero
    const float magnitude = std::fabs(value) * 16777216.0f;  // in units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(magnitude)));
  }
  uint32_t mantissa = abs + 0xc8000fffu + ((abs >> 13) & 1u);  // rebias exponent by -112, round to nearest even
  return static_cast<uint16_t>(sign | (mantissa >> 13));
}

float from_half(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa != 0 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign != 0 ? -magnitude : magnitude;
}

uint16_t to_bfloat16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float from_bfloat16(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <class T>
T get(const std::string& bytes, size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

// Appends one JSON value as an element of `d` to `out`; false when it does not fit.
bool put_element(const nlohmann::json& v, const Datatype& d, std::string& out) {
  const std::string_view t = d.v2;
  if (t == "BOOL") {
    if (!v.is_boolean()) return false;
    out.push_back(v.get<bool>() ? 1 : 0);
    return true;
  }
  if (t == "FP32" || t == "FP64" || t == "FP16" || t == "BF16") {
    if (!v.is_number()) return false;
    const double x = v.get<double>();
    if (t == "FP64") {
      put(out, x);
    } else if (std::fabs(x) > (t == "FP16" ? 65504.0 : static_cast<double>(std::numeric_limits<float>::max()))) {
      return false;
    } else if (t == "FP32") {
      put(out, static_cast<float>(x));
    } else if (t == "FP16") {
      put(out, to_half(static_cast<float>(x)));
    } else {
      put(out, to_bfloat16(static_cast<float>(x)));
    }
    return true;
  }
  // Integers: exact JSON integers within the type's range.
  if (!v.is_number_integer()) return false;
  if (t == "UINT8") {
    if (v.is_number_unsigned() ? v.get<uint64_t>() > 255 : v.get<int64_t>() < 0 || v.get<int64_t>() > 255) return false;
    out.push_back(static_cast<char>(v.get<int64_t>()));
    return true;
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  const int64_t x = v.get<int64_t>();
  const auto within = [x](auto type_tag) {
    using T = decltype(type_tag);
    return x >= std::numeric_limits<T>::min() && x <= std::numeric_limits<T>::max();
  };
  if (t == "INT8") {
    if (!within(int8_t{})) return false;
    put(out, static_cast<int8_t>(x));
  } else if (t == "INT16") {
    if (!within(int16_t{})) return false;
    put(out, static_cast<int16_t>(x));
  } else if (t == "INT32") {
    if (!within(int32_t{})) return false;
    put(out, static_cast<int32_t>(x));
  } else {
    put(out, x);
  }
  return true;
}

// Appends `data`'s values to `out` in row-major order, at most `limit` of
// them. `shape`: null for flat data (an array of values, or one value); for
// nested data, level k must hold exactly shape[k] entries and values lie at
// depth shape->size() alone, so that a ragged nesting ([[1], [2, 3, 4]] for
// [1, 4]) or a transposed one is refused rather than read as the values in a
// row.
void flatten(const nlohmann::json& data, const Datatype& d, const std::string& name, uint64_t limit, uint64_t& count,
             std::string& out, const std::vector<int64_t>* shape = nullptr, size_t depth = 0) {
  const auto misnested = [&](const std::string& what) {
    return ApiError(400, "input '" + name + "': nested \"data\" must follow shape " + shape_text(*shape) +
                             " (or be flat): " + what);
  };
  if (!data.is_array()) {
    if (shape != nullptr && depth != shape->size()) {
      throw misnested("a value lies at depth " + std::to_string(depth) + ", not " + std::to_string(shape->size()));
    }
    if (++count > limit) return;
    if (!put_element(data, d, out)) {
      throw ApiError(400, "input '" + name + "': " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40) +
                              " is not a " + d.v2 + " value");
    }
    return;
  }
  if (shape != nullptr) {
    if (depth >= shape->size()) {
      throw misnested("an array lies at depth " + std::to_string(depth) + ", past its " +
                      std::to_string(shape->size()) + " dimensions");
    }
    if (data.size() != static_cast<uint64_t>((*shape)[depth])) {
      throw misnested("an array at depth " + std::to_string(depth) + " holds " + std::to_string(data.size()) +
                      " entries, not " + std::to_string((*shape)[depth]));
    }
  }
  for (const nlohmann::json& item : data) {
    flatten(item, d, name, limit, count, out, shape, depth + 1);
    if (count > limit) return;
  }
}

// Whether "data" is nested: an array holding an array.
bool nested(const nlohmann::json& data) {
  return data.is_array() && std::any_of(data.begin(), data.end(), [](const nlohmann::json& v) { return v.is_array(); });
}

}  // namespace

std::optional<std::string> dtype_of_datatype(std::string_view datatype) {
  if (const Datatype* d = by_v2(datatype)) return std::string(d->dtype);
  return std::nullopt;
}

std::optional<std::string> datatype_of_dtype(std::string_view dtype) {
  if (const Datatype* d = by_dtype(dtype)) return std::string(d->v2);
  return std::nullopt;
}

size_t element_size(std::string_view dtype) {
  const Datatype* d = by_dtype(dtype);
  return d != nullptr ? d->size : 0;
}

namespace {

// "parameters": {...} of a request, an input or an output; null when absent.
const nlohmann::json* parameters_of(const nlohmann::json& object, const std::string& what) {
  const auto p = object.find("parameters");
  if (p == object.end()) return nullptr;
  if (!p->is_object()) throw ApiError(400, what + ": \"parameters\" is not an object");
  return &*p;
}

// A request's own "parameters" are an ordered_json (parse_infer_request).
template <class Json>
bool flag(const Json* parameters, const char* name, const std::string& what) {
  if (parameters == nullptr) return false;
  const auto v = parameters->find(name);
  if (v == parameters->end()) return false;
  if (!v->is_boolean()) throw ApiError(400, what + ": parameter \"" + name + "\" is not true or false");
  return v->template get<bool>();
}

// A BYTES input's one string: a str parameter's value. From "data" (a
// string, possibly in one or two arrays), or binary: a 4-byte little-endian
// length, then the bytes (taken off the front of `binary`).
std::string bytes_input(const nlohmann::json& in, const std::string& name, bool has_binary, std::string_view& binary) {
  const auto fail = [&name]() -> ApiError {
    return ApiError(400, "input '" + name + "': datatype BYTES holds one string here (shape [] or [1]), the value of a "
                                            "str parameter; tensors hold numbers: send them as a numeric datatype");
  };
  const auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array() || shape->size() > 1 ||
      (shape->size() == 1 && (*shape)[0] != nlohmann::json(1))) {
    throw fail();
  }
  const nlohmann::json* parameters = parameters_of(in, "input '" + name + "'");
  if (parameters != nullptr && parameters->contains("binary_data_size")) {
    const nlohmann::json& size = parameters->at("binary_data_size");
    if (in.contains("data")) throw ApiError(400, "input '" + name + "' has both \"data\" and binary_data_size");
    if (!has_binary) {
      throw ApiError(400, "input '" + name + "' has binary_data_size, but the request has no "
                          "Inference-Header-Content-Length header");
    }
    if (!size.is_number_unsigned() || size.get<uint64_t>() < 4 || size.get<uint64_t>() > binary.size()) {
      throw ApiError(400, "input '" + name + "': binary_data_size does not fit the binary data left");
    }
    uint32_t length = 0;
    for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(binary[static_cast<size_t>(i)]);
    if (uint64_t{length} + 4 != size.get<uint64_t>()) {
      throw ApiError(400, "input '" + name + "': binary_data_size is not 4 bytes of length and one string of that length");
    }
    std::string text(binary.substr(4, length));
    binary.remove_prefix(4 + length);
    return text;
  }
  const auto data = in.find("data");
  if (data == in.end()) throw ApiError(400, "input '" + name + "' has no \"data\" (nor binary_data_size)");
  const nlohmann::json* value = &*data;
  for (int depth = 0; depth < 2 && value->is_array() && value->size() == 1; ++depth) value = &(*value)[0];
  if (!value->is_string()) throw fail();
  return value->get<std::string>();
}

}  // namespace

namespace {

// The input's "shape" into its tensor; returns its element count, capped
// above `body_size` (more elements than bytes in the body cannot be there).
uint64_t read_shape(const nlohmann::json& in, InferInput& input, uint64_t body_size) {
  const auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array()) throw ApiError(400, "input '" + input.name + "' has no \"shape\"");
  uint64_t elements = 1;
  for (const nlohmann::json& dim : *shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
      throw ApiError(400, "input '" + input.name + "': the shape holds something other than sizes >= 0");
    }
    const auto size = static_cast<uint64_t>(dim.get<int64_t>());
    input.tensor.shape.push_back(static_cast<int64_t>(size));
    elements = size == 0 || elements == 0 ? 0 : (elements > body_size / size + 1 ? body_size + 1 : elements * size);
  }
  if (shape->size() > 64) throw ApiError(400, "input '" + input.name + "' has more than 64 dimensions");
  return elements;
}

// The binary tensor data extension: the input's bytes follow the JSON, and
// are taken off the front of `binary`.
std::string binary_tensor_bytes(const nlohmann::json& size_field, const InferInput& input, const Datatype& d,
                                std::string_view& binary) {
  if (!size_field.is_number_unsigned()) throw ApiError(400, "input '" + input.name + "': binary_data_size is not a size");
  const uint64_t size = size_field.get<uint64_t>();
  if (size > binary.size()) {
    throw ApiError(400, "input '" + input.name + "': binary_data_size is " + std::to_string(size) + " but only " +
                            std::to_string(binary.size()) + " bytes of binary data are left");
  }
  // Counted exactly here (read_shape's count is capped by the body size).
  uint64_t exact = 1;
  for (int64_t dim : input.tensor.shape) {
    exact = dim == 0 || exact == 0 ? 0 : (exact > size / static_cast<uint64_t>(dim) + 1 ? size + 1 : exact * static_cast<uint64_t>(dim));
  }
  if (exact > size || exact * d.size != size) {
    throw ApiError(400, "input '" + input.name + "': shape " + shape_text(input.tensor.shape) + " of " + d.v2 +
                            " needs " + (exact > size ? "more than " + std::to_string(size) : std::to_string(exact * d.size)) +
                            " bytes, but binary_data_size is " + std::to_string(size));
  }
  std::string bytes(binary.data(), size);
  binary.remove_prefix(size);
  return bytes;
}

// How many values `shape` holds, in words: read_shape's count stops at the
// body size, a message names the shape's own.
std::string values_needed(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (const int64_t dim : shape) {
    if (mul_overflows(n, static_cast<uint64_t>(dim), &n)) return "more than " + std::to_string(UINT64_MAX);
  }
  return std::to_string(n);
}

// The tensor's bytes, from "data" or from the binary data after the JSON.
std::string tensor_bytes(const nlohmann::json& in, const InferInput& input, const Datatype& d, uint64_t elements,
                         bool has_json_size, std::string_view& binary) {
  const auto data = in.find("data");
  const nlohmann::json* parameters = parameters_of(in, "input '" + input.name + "'");
  if (parameters != nullptr) {
    if (const auto binary_size = parameters->find("binary_data_size"); binary_size != parameters->end()) {
      if (data != in.end()) throw ApiError(400, "input '" + input.name + "' has both \"data\" and binary_data_size");
      if (!has_json_size) {
        throw ApiError(400, "input '" + input.name + "' has binary_data_size, but the request has no "
                                "Inference-Header-Content-Length header");
      }
      return binary_tensor_bytes(*binary_size, input, d, binary);
    }
  }
  if (data == in.end()) throw ApiError(400, "input '" + input.name + "' has no \"data\" (nor binary_data_size)");
  std::string bytes;
  uint64_t count = 0;
  flatten(*data, d, input.name, elements, count, bytes, nested(*data) ? &input.tensor.shape : nullptr);
  if (count != elements) {
    throw ApiError(400, "input '" + input.name + "': shape " + shape_text(input.tensor.shape) + " needs " +
                            values_needed(input.tensor.shape) + " values, but " +
                            (count > elements ? "more" : std::to_string(count)) + " were given");
  }
  return bytes;
}

// One entry of "inputs". `names` holds the names seen, as views into the
// document: a hash set, since a comparison with every earlier input made one
// 5 MB request of 80,000 inputs take minutes of a core.
InferInput parse_input(const nlohmann::json& in, std::unordered_set<std::string_view>& names, uint64_t body_size,
                       bool has_json_size, std::string_view& binary) {
  if (!in.is_object()) throw ApiError(400, "an input is not a JSON object");
  const auto name = in.find("name");
  if (name == in.end() || !name->is_string()) throw ApiError(400, "an input has no \"name\"");
  InferInput input;
  input.name = name->get<std::string>();
  if (!names.insert(name->get_ref<const std::string&>()).second) {
    throw ApiError(400, "input '" + input.name.substr(0, 100) + "' is given twice");
  }
  const auto datatype = in.find("datatype");
  if (datatype == in.end() || !datatype->is_string()) throw ApiError(400, "input '" + input.name + "' has no \"datatype\"");
  const Datatype* d = by_v2(datatype->get<std::string>());
  if (d == nullptr && datatype->get<std::string>() == "BYTES") {
    input.text = bytes_input(in, input.name, has_json_size, binary);
    return input;
  }
  if (d == nullptr) {
    throw ApiError(400, "input '" + input.name + "': datatype " + datatype->get<std::string>().substr(0, 20) +
                            " is not served (BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64)");
  }
  const uint64_t elements = read_shape(in, input, body_size);
  std::string bytes = tensor_bytes(in, input, *d, elements, has_json_size, binary);
  input.tensor.dtype = d->dtype;
  input.tensor.stride = contiguous_strides(input.tensor.shape);
  input.tensor.bytes = std::make_shared<const std::string>(std::move(bytes));
  return input;
}

// "outputs": the names asked for, and which of them binary.
void parse_outputs(const nlohmann::json& doc, InferRequest& request) {
  const auto outputs = doc.find("outputs");
  if (outputs == doc.end()) return;
  if (!outputs->is_array()) throw ApiError(400, "\"outputs\" is not an array");
  for (const nlohmann::json& out : *outputs) {
    if (!out.is_object() || !out.contains("name") || !out.at("name").is_string()) {
      throw ApiError(400, "an entry of \"outputs\" has no \"name\"");
    }
    const std::string name = out.at("name").get<std::string>();
    request.outputs.push_back(name);
    if (flag(parameters_of(out, "output '" + name + "'"), "binary_data", "output '" + name + "'")) {
      request.binary_outputs.push_back(name);
    }
  }
}

}  // namespace

InferRequest parse_infer_request(std::string_view whole, std::optional<uint64_t> json_size) {
  if (json_size && *json_size > whole.size()) {
    throw ApiError(400, "Inference-Header-Content-Length (" + std::to_string(*json_size) + ") is larger than the body (" +
                            std::to_string(whole.size()) + " bytes)");
  }
  const std::string_view body = json_size ? whole.substr(0, *json_size) : whole;
  std::string_view binary = json_size ? whole.substr(*json_size) : std::string_view();
  std::string problem;
  // A request's tensors are its values: only the body's size (the server's
  // limit) bounds them. Its "parameters" are parsed in order (a Dict argument
  // keeps it), apart from the rest, whose keys come sorted: each value once,
  // as parse_cost counts it.
  std::optional<JsonApart> parsed =
      parse_bounded_json_apart(body, "parameters", &problem, 64, body.size() + 1, UINT64_MAX);
  if (!parsed) throw ApiError(400, "the request body is " + problem);
  const nlohmann::json* doc = &parsed->rest;
  if (!doc->is_object()) throw ApiError(400, "the request body is not a JSON object");
  InferRequest request;
  if (const auto id = doc->find("id"); id != doc->end()) {
    if (!id->is_string()) throw ApiError(400, "\"id\" is not a string");
    request.id = id->get<std::string>();
  }
  const auto inputs = doc->find("inputs");
  // An empty array is a request: a method whose parameters are all
  // non-tensor takes them from "parameters" (method_arguments says what is
  // missing otherwise).
  if (inputs == doc->end() || !inputs->is_array()) throw ApiError(400, "the request has no \"inputs\" array");
  std::unordered_set<std::string_view> names;
  names.reserve(inputs->size());
  request.inputs.reserve(inputs->size());
  for (const nlohmann::json& in : *inputs) {
    request.inputs.push_back(parse_input(in, names, body.size(), json_size.has_value(), binary));
  }
  if (!binary.empty()) {
    throw ApiError(400, std::to_string(binary.size()) + " bytes of binary data follow the JSON that no input's "
                                                        "binary_data_size claims");
  }
  parse_outputs(*doc, request);
  if (parsed->member) {
    if (!parsed->member->is_object()) throw ApiError(400, "the request: \"parameters\" is not an object");
    request.binary_data_output = flag(&*parsed->member, "binary_data_output", "the request");
    request.parameters = std::move(*parsed->member);
  }
  return request;
}

uint64_t parse_cost(std::string_view whole, std::optional<uint64_t> json_size) {
  const std::string_view json = json_size && *json_size <= whole.size() ? whole.substr(0, *json_size) : whole;
  uint64_t values = 1, members = 0;
  bool in_string = false, escaped = false;
  for (const char c : json) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == ',' || c == '[' || c == '{') ++values;
    else if (c == ':') ++members;
  }
  // 48 bytes a value (its 16, and a growing array's old and new storage);
  // a member's map node (key, value, links, malloc's header) about 96; the
  // strings and the decoded data at most the text's bytes once more.
  return 48 * values + 96 * members + whole.size();
}

namespace {

// The longest text nlohmann writes for one value of a datatype, with its comma.
uint64_t json_chars(std::string_view v2) {
  if (v2 == "BOOL") return 6;
  if (v2 == "UINT8" || v2 == "INT8") return 5;
  if (v2 == "INT16") return 7;
  if (v2 == "INT32") return 12;
  if (v2 == "INT64") return 21;
  return 25;  // a float as the shortest double that reads back: "-1.2345678901234567e-308,"
}

// Appends a tensor's values, row-major, as nlohmann writes them in a JSON
// array ("1.5,2,..." without the brackets); ApiError(500) once `out` would
// pass `max_bytes`.
void append_json_data(std::string& out, const NamedTensor& named, const Datatype& d, uint64_t max_bytes) {
  const HostTensor& t = named.tensor;
  uint64_t n = 1;
  for (int64_t dim : t.shape) n *= static_cast<uint64_t>(dim);
  const std::string empty;
  const std::string& bytes = t.bytes ? *t.bytes : empty;
  if (bytes.size() < n * d.size) throw ApiError(500, "output '" + named.name + "' holds fewer bytes than its shape needs");
  nlohmann::detail::serializer<nlohmann::json> writer(nlohmann::detail::output_adapter<char, std::string>(out), ' ',
                                                      nlohmann::json::error_handler_t::replace);
  const std::string_view v2 = d.v2;
  for (uint64_t i = 0; i < n; ++i) {
    nlohmann::json value;
    if (v2 == "BOOL") value = bytes[i] != 0;
    else if (v2 == "UINT8") value = get<uint8_t>(bytes, i);
    else if (v2 == "INT8") value = get<int8_t>(bytes, i);
    else if (v2 == "INT16") value = get<int16_t>(bytes, i);
    else if (v2 == "INT32") value = get<int32_t>(bytes, i);
    else if (v2 == "INT64") value = get<int64_t>(bytes, i);
    else if (v2 == "FP16") value = from_half(get<uint16_t>(bytes, i));
    else if (v2 == "BF16") value = from_bfloat16(get<uint16_t>(bytes, i));
    else if (v2 == "FP32") value = get<float>(bytes, i);
    else value = get<double>(bytes, i);
    if (i > 0) out.push_back(',');
    writer.dump(value, false, false, 0);
    if ((i & 1023) == 0 && out.size() > max_bytes) break;
  }
  if (out.size() > max_bytes) {
    throw ApiError(500, "the response is larger than --max-response (" + std::to_string(max_bytes) +
                            " bytes): ask for fewer outputs or rows, or binary outputs");
  }
}

}  // namespace

uint64_t response_size_bound(const std::vector<NamedTensor>& outputs, const std::vector<std::string>& binary,
                             bool all_binary) {
  const std::unordered_set<std::string_view> raw_names(binary.begin(), binary.end());
  uint64_t total = 256;
  for (const NamedTensor& out : outputs) {
    uint64_t n = 1;
    for (int64_t dim : out.tensor.shape) n *= static_cast<uint64_t>(dim);
    const Datatype* d = by_dtype(out.tensor.dtype);
    const bool raw = all_binary || raw_names.count(out.name) != 0;
    total += 128 + 6 * out.name.size() + 21 * out.tensor.shape.size();  // name (escaped), shape, keys
    total += d == nullptr ? 0 : n * (raw ? d->size : json_chars(d->v2));
  }
  return total;
}

nlohmann::json tensor_json(const NamedTensor& named) {
  const HostTensor& t = named.tensor;
  const Datatype* d = by_dtype(t.dtype);
  if (d == nullptr) {
    throw ApiError(500, "output '" + named.name + "' has dtype " + t.dtype + ", which the protocol's JSON cannot carry");
  }
  uint64_t n = 1;
  for (int64_t dim : t.shape) n *= static_cast<uint64_t>(dim);
  const std::string empty;
  const std::string& bytes = t.bytes ? *t.bytes : empty;
  if (bytes.size() < n * d->size) throw ApiError(500, "output '" + named.name + "' holds fewer bytes than its shape needs");
  nlohmann::json data = nlohmann::json::array();
  const std::string_view v2 = d->v2;
  for (uint64_t i = 0; i < n; ++i) {
    if (v2 == "BOOL") data.push_back(bytes[i] != 0);
    else if (v2 == "UINT8") data.push_back(get<uint8_t>(bytes, i));
    else if (v2 == "INT8") data.push_back(get<int8_t>(bytes, i));
    else if (v2 == "INT16") data.push_back(get<int16_t>(bytes, i));
    else if (v2 == "INT32") data.push_back(get<int32_t>(bytes, i));
    else if (v2 == "INT64") data.push_back(get<int64_t>(bytes, i));
    else if (v2 == "FP16") data.push_back(from_half(get<uint16_t>(bytes, i)));
    else if (v2 == "BF16") data.push_back(from_bfloat16(get<uint16_t>(bytes, i)));
    else if (v2 == "FP32") data.push_back(get<float>(bytes, i));
    else data.push_back(get<double>(bytes, i));
  }
  return {{"name", named.name}, {"datatype", d->v2}, {"shape", t.shape}, {"data", std::move(data)}};
}

std::string render_infer_response(const std::string& model, const std::string& id,
                                  const std::vector<NamedTensor>& outputs, const std::vector<std::string>& wanted,
                                  const std::vector<std::string>& binary, bool all_binary, size_t* json_size,
                                  uint64_t max_bytes) {
  // Names in sets: a request may name as many outputs as the model returns,
  // and each is looked up once (linear, not outputs x names).
  std::unordered_set<std::string_view> returned;
  for (const NamedTensor& out : outputs) returned.insert(out.name);
  const std::unordered_set<std::string_view> wanted_names(wanted.begin(), wanted.end());
  const std::unordered_set<std::string_view> raw_names(binary.begin(), binary.end());
  for (const std::string& name : wanted) {
    if (returned.count(name) == 0) {
      std::string names;
      for (const NamedTensor& out : outputs) names += (names.empty() ? "" : ", ") + out.name;
      throw ApiError(400, "the model has no output '" + name + "'; it returns " + names);
    }
  }
  nlohmann::json response = {{"model_name", model}, {"outputs", nlohmann::json::array()}};
  if (!id.empty()) response["id"] = id;
  const auto too_large = [max_bytes] {
    return ApiError(500, "the response is larger than --max-response (" + std::to_string(max_bytes) +
                             " bytes): ask for fewer outputs or rows, or binary outputs");
  };
  std::string tail;  // the binary outputs' bytes
  // The JSON outputs, whose "data" is written into the text after the rest
  // is dumped with "data": [] in its place.
  std::vector<std::pair<const NamedTensor*, const Datatype*>> json_data;
  for (const NamedTensor& out : outputs) {
    if (!wanted.empty() && wanted_names.count(out.name) == 0) continue;
    if (!all_binary && raw_names.count(out.name) == 0) {
      const Datatype* d = by_dtype(out.tensor.dtype);
      if (d == nullptr) {
        throw ApiError(500, "output '" + out.name + "' has dtype " + out.tensor.dtype + ", which the protocol's JSON cannot carry");
      }
      response["outputs"].push_back({{"name", out.name}, {"datatype", d->v2}, {"shape", out.tensor.shape},
                                     {"data", nlohmann::json::array()}});
      json_data.emplace_back(&out, d);
      continue;
    }
    const std::optional<std::string> datatype = datatype_of_dtype(out.tensor.dtype);
    if (!datatype) {
      throw ApiError(500, "output '" + out.name + "' has dtype " + out.tensor.dtype + ", which the protocol cannot carry");
    }
    uint64_t n = 1;
    for (int64_t dim : out.tensor.shape) n *= static_cast<uint64_t>(dim);
    const size_t size = static_cast<size_t>(n * element_size(out.tensor.dtype));
    if (!out.tensor.bytes || out.tensor.bytes->size() < size) {
      throw ApiError(500, "output '" + out.name + "' holds fewer bytes than its shape needs");
    }
    response["outputs"].push_back({{"name", out.name},
                                   {"datatype", *datatype},
                                   {"shape", out.tensor.shape},
                                   {"parameters", {{"binary_data_size", size}}}});
    if (tail.size() + size > max_bytes) throw too_large();
    tail.append(out.tensor.bytes->data(), size);
  }
  // NaN and Inf have no JSON form: they are written as null.
  const std::string skeleton = response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Keys are sorted, so "data" opens each output's object; inside a string
  // its quotes would be escaped, so the k-th "data":[] is the k-th output's.
  constexpr std::string_view kEmptyData = "\"data\":[]";
  std::string text;
  size_t at = 0;
  for (const auto& [out, d] : json_data) {
    const size_t found = skeleton.find(kEmptyData, at);
    text.append(skeleton, at, found + kEmptyData.size() - 1 - at);  // up to and with the '['
    append_json_data(text, *out, *d, max_bytes);
    at = found + kEmptyData.size() - 1;  // the ']'
  }
  text.append(skeleton, at, std::string::npos);
  if (text.size() + tail.size() > max_bytes) throw too_large();
  if (json_size != nullptr) *json_size = binary.empty() && !all_binary ? 0 : text.size();
  text += tail;
  return text;
}

std::optional<std::pair<std::string, std::vector<int64_t>>> recorded_shape(const std::string& line) {
  const size_t colon = line.find(": Tensor ");
  const size_t open = line.find('[', colon == std::string::npos ? 0 : colon);
  const size_t close = line.find(']', open == std::string::npos ? 0 : open);
  if (colon == std::string::npos || colon == 0 || open == std::string::npos || close == std::string::npos) return std::nullopt;
  std::vector<int64_t> sizes;
  std::string_view inside(line.data() + open + 1, close - open - 1);
  while (!inside.empty()) {
    const size_t comma = inside.find(',');
    std::string_view item = inside.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    int64_t size = 0;
    if (item.empty() || item.size() > 18) return std::nullopt;
    for (char c : item) {
      if (c < '0' || c > '9') return std::nullopt;
      size = size * 10 + (c - '0');
    }
    sizes.push_back(size);
    if (comma == std::string_view::npos) break;
    inside.remove_prefix(comma + 1);
  }
  return std::make_pair(line.substr(0, colon), std::move(sizes));
}

nlohmann::json model_metadata(const std::string& name, const ServedModelInfo& info,
                              const std::map<std::string, std::vector<int64_t>>& recorded_shapes) {
  const auto values = [&recorded_shapes](const std::vector<ServedValue>& list, bool inputs) {
    nlohmann::json out = nlohmann::json::array();
    for (const ServedValue& v : list) {
      std::string datatype;
      // -1: a size the schema does not give. A recorded self-check gives
      // every size but the batch dimension's.
      nlohmann::json shape = nlohmann::json::array({-1});
      // A non-tensor parameter that an input can give (arguments.h): a
      // scalar as one value (a str as one BYTES string), a list of numbers as
      // a 1-D tensor. Others (dicts, tuples, List[str], ...) go in the
      // request's "parameters": their TorchScript type.
      std::string type = v.type;
      if (type.rfind("Optional[", 0) == 0 && type.back() == ']') type = type.substr(9, type.size() - 10);
      const bool is_list = type.rfind("List[", 0) == 0 && type.back() == ']';
      const std::string element = is_list ? type.substr(5, type.size() - 6) : type;
      const std::map<std::string, std::string> scalars = {
          {"int", "INT64"}, {"float", "FP64"}, {"bool", "BOOL"}, {"str", "BYTES"}};
      if (v.type == "Tensor") {
        datatype = datatype_of_dtype(v.dtype.empty() ? "float32" : v.dtype).value_or("FP32");
      } else if (auto it = scalars.find(element); it != scalars.end() && !(is_list && element == "str")) {
        datatype = it->second;
        if (!is_list && inputs) shape = nlohmann::json::array({1});
      } else {
        datatype = v.type;  // not a tensor: its TorchScript type
      }
      if (auto it = recorded_shapes.find(v.name); it != recorded_shapes.end()) {
        shape = it->second;
        if (!it->second.empty()) shape[0] = -1;
      }
      out.push_back({{"name", v.name}, {"datatype", datatype}, {"shape", shape}});
    }
    return out;
  };
  return {{"name", name},
          {"versions", nlohmann::json::array({"1"})},
          {"platform", "pytorch_torchscript"},
          {"inputs", values(info.inputs, true)},
          {"outputs", values(info.outputs, false)},
          {"parameters", {{"schema", info.schema}, {"device", info.device}, {"libtorch", info.libtorch_version}}}};
}

// --- dynamic batching --------------------------------------------------------------

std::optional<int64_t> batch_rows(const std::vector<HostTensor>& inputs) {
  if (inputs.empty() || inputs[0].shape.empty()) return std::nullopt;
  const int64_t rows = inputs[0].shape[0];
  for (const HostTensor& t : inputs) {
    if (t.shape.empty() || t.shape[0] != rows || element_size(t.dtype) == 0) return std::nullopt;
  }
  return rows;
}

bool stackable(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  if (a.size() != b.size() || !batch_rows(a) || !batch_rows(b)) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype != b[i].dtype || a[i].shape.size() != b[i].shape.size()) return false;
    if (!std::equal(a[i].shape.begin() + 1, a[i].shape.end(), b[i].shape.begin() + 1)) return false;
  }
  return true;
}

std::vector<HostTensor> stack(const std::vector<const std::vector<HostTensor>*>& requests) {
  std::vector<HostTensor> out;
  if (requests.empty()) return out;
  for (size_t i = 0; i < requests[0]->size(); ++i) {
    HostTensor t;
    t.dtype = (*requests[0])[i].dtype;
    t.shape = (*requests[0])[i].shape;
    t.shape[0] = 0;
    std::string bytes;
    for (const auto* request : requests) {
      const HostTensor& part = (*request)[i];
      t.shape[0] += part.shape[0];
      if (part.bytes) bytes += *part.bytes;
    }
    t.stride = contiguous_strides(t.shape);
    t.bytes = std::make_shared<const std::string>(std::move(bytes));
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<std::vector<std::vector<NamedTensor>>> unstack(const std::vector<NamedTensor>& outputs,
                                                              const std::vector<int64_t>& rows) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  std::vector<std::vector<NamedTensor>> split(rows.size());
  for (const NamedTensor& out : outputs) {
    const HostTensor& t = out.tensor;
    const size_t size = element_size(t.dtype);
    if (t.shape.empty() || t.shape[0] != total || size == 0 || !t.bytes) return std::nullopt;
    uint64_t row_bytes = size;
    for (size_t d = 1; d < t.shape.size(); ++d) row_bytes *= static_cast<uint64_t>(t.shape[d]);
    if (t.bytes->size() != row_bytes * static_cast<uint64_t>(total)) return std::nullopt;
    uint64_t at = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      HostTensor part = t;
      part.shape[0] = rows[r];
      part.stride = contiguous_strides(part.shape);
      part.offset = 0;
      const uint64_t n = row_bytes * static_cast<uint64_t>(rows[r]);
      part.bytes = std::make_shared<const std::string>(t.bytes->substr(at, n));
      at += n;
      split[r].push_back(NamedTensor{out.name, std::move(part)});
    }
  }
  return split;
}

}  // namespace tsarchive::serve
