// --input arguments of `tsarchive run`: tensor specs, json:TEXT and @FILE.
//
// Spec grammar (host_value.h has the user-facing summary):
//   spec   := shape [ ':' dtype [ ':' fill ] ]
//   shape  := "scalar" | dim { 'x' dim }          dim := digit+   (0 allowed)
//   dtype  := float32 float64 float16 bfloat16 int64 int32 int16 int8 uint8 bool
//             complex64 complex128 | float double half long int
//   fill   := normal | uniform | zeros | ones | range | full=NUMBER | randint=INT,INT
// Sizes are bounded (each dim and the element count at most 2^31) so that a
// typo such as 1x3x2240000x224 is refused instead of allocating gigabytes.
// Fills that make no sense for a dtype are refused here rather than left to
// torch: normal/uniform on integer or bool tensors, range on bool, randint
// bounds outside the dtype, full=V that the dtype cannot hold.
#include <charconv>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "format/archive.h"
#include "base/bounded_json.h"
#include "base/edit_distance.h"
#include "base/strings.h"
#include "base/error.h"
#include "contract/host_value.h"
#include "core/inputs/image.h"
#include "core/inputs/input_values.h"

namespace tsarchive {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 31;
constexpr size_t kMaxJsonDepth = 64;
constexpr size_t kMaxOriginChars = 60;

constexpr const char* kShapeHint =
    "a spec is SHAPE[:DTYPE[:FILL]], e.g. 1x3x224x224, 8x128:int64:zeros, scalar:float64; "
    "SHAPE is dims joined by 'x' (0 allowed) or 'scalar'";
constexpr const char* kDtypeHint =
    "dtypes: float32 float64 float16 bfloat16 int64 int32 int16 int8 uint8 bool complex64 complex128 "
    "(aliases: float double half long int)";
constexpr const char* kFillHint =
    "fills: normal uniform zeros ones range full=V randint=LOW,HIGH (LOW < HIGH, HIGH exclusive)";

enum class DtypeClass { Floating, Complex, Integer, Bool };

struct SpecDtype {
  const char* name;
  const char* canonical;
  DtypeClass cls;
  int64_t min = 0;  // integer types: the values they hold
  int64_t max = 0;
};

constexpr SpecDtype kSpecDtypes[] = {
    {"float32", "float32", DtypeClass::Floating},
    {"float", "float32", DtypeClass::Floating},
    {"float64", "float64", DtypeClass::Floating},
    {"double", "float64", DtypeClass::Floating},
    {"float16", "float16", DtypeClass::Floating},
    {"half", "float16", DtypeClass::Floating},
    {"bfloat16", "bfloat16", DtypeClass::Floating},
    {"int64", "int64", DtypeClass::Integer, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()},
    {"long", "int64", DtypeClass::Integer, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()},
    {"int32", "int32", DtypeClass::Integer, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()},
    {"int", "int32", DtypeClass::Integer, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()},
    {"int16", "int16", DtypeClass::Integer, std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()},
    {"int8", "int8", DtypeClass::Integer, std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max()},
    {"uint8", "uint8", DtypeClass::Integer, 0, 255},
    {"bool", "bool", DtypeClass::Bool, 0, 1},
    {"complex64", "complex64", DtypeClass::Complex},
    {"complex128", "complex128", DtypeClass::Complex},
};

class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  TensorSpec parse() {
    TensorSpec spec;
    spec.text = std::string(text_);
    std::vector<std::string_view> parts;
    size_t begin = 0;
    while (true) {
      const size_t colon = text_.find(':', begin);
      parts.push_back(text_.substr(begin, colon == std::string_view::npos ? std::string_view::npos : colon - begin));
      if (colon == std::string_view::npos) break;
      begin = colon + 1;
    }
    if (parts.size() > 3) {
      fail("unexpected \":" + std::string(parts[3]) + "\" after the fill", kShapeHint);
    }
    check_slips(parts[0]);
    spec.shape = shape(parts[0]);
    const SpecDtype& dtype = parts.size() > 1 ? find_dtype(parts[1]) : kSpecDtypes[0];
    spec.dtype = dtype.canonical;
    if (parts.size() > 2) {
      fill(parts[2], dtype, spec);
    } else if (dtype.cls == DtypeClass::Integer) {
      spec.fill = TensorFill::RandInt;  // low/high keep their defaults, 0 and 10
    } else if (dtype.cls == DtypeClass::Bool) {
      spec.fill = TensorFill::RandInt;
      spec.high = 2;
    }
    return spec;
  }

 private:
  [[noreturn]] void fail(const std::string& why, const std::string& hint) const {
    throw_usage("bad input spec \"" + std::string(text_) + "\": " + why, hint);
  }

  std::vector<int64_t> shape(std::string_view text) const {
    if (text == "scalar") return {};
    if (text.empty()) fail("the shape is empty", kShapeHint);
    std::vector<int64_t> dims;
    int64_t elements = 1;
    size_t begin = 0;
    while (true) {
      const size_t x = text.find('x', begin);
      const std::string_view dim = text.substr(begin, x == std::string_view::npos ? std::string_view::npos : x - begin);
      if (dim.empty()) fail("empty dimension in shape \"" + std::string(text) + "\"", kShapeHint);
      if (dim[0] == '-') fail("negative dimension \"" + std::string(dim) + "\"", kShapeHint);
      int64_t value = 0;
      const auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), value);
      if (dim[0] == '+' || end != dim.data() + dim.size() ||
          (ec != std::errc() && ec != std::errc::result_out_of_range)) {
        fail("\"" + std::string(dim) + "\" in shape \"" + std::string(text) + "\" is not a dimension", kShapeHint);
      }
      if (ec == std::errc::result_out_of_range || value > kMaxElements) {
        fail("dimension " + std::string(dim) + " is larger than 2^31", kShapeHint);
      }
      dims.push_back(value);
      elements *= value;  // both at most 2^31: no overflow before the check below
      if (elements > kMaxElements) {
        fail("more than 2^31 elements", "generated inputs are limited to 2^31 elements; give a file for larger ones");
      }
      if (x == std::string_view::npos) break;
      begin = x + 1;
    }
    return dims;
  }

  const SpecDtype& find_dtype(std::string_view name) const {
    std::vector<std::string> names;
    for (const SpecDtype& d : kSpecDtypes) {
      if (name == d.name) return d;
      names.emplace_back(d.name);
    }
    fail(name.empty() ? std::string("the dtype is empty") : "unknown dtype \"" + std::string(name) + "\"",
         did_you_mean(name, names) + kDtypeHint);
  }

  // The slips people make most: a file without its '@', a shape written
  // with commas (as Python prints it). Refused with the spelling they meant.
  void check_slips(std::string_view shape) const {
    const bool file_like = text_.find(':') == std::string_view::npos &&
                           (text_.find('/') != std::string_view::npos || ends_with(text_, ".npy") ||
                            ends_with(text_, ".pt") || ends_with(text_, ".pth"));
    if (file_like) {
      fail("not a shape", "to read the file, write '@" + std::string(text_) + "' (--input @FILE)");
    }
    if (shape.find(',') != std::string_view::npos &&
        shape.find_first_not_of("0123456789, ()[]") == std::string_view::npos) {
      std::string dims;
      for (char c : shape) {
        if (c >= '0' && c <= '9') dims += c;
        if (c == ',' && !dims.empty() && dims.back() != 'x') dims += 'x';
      }
      while (!dims.empty() && dims.back() == 'x') dims.pop_back();
      fail("dimensions are joined by 'x', not ','",
           "did you mean '" + dims + std::string(text_.substr(shape.size())) + "'?");
    }
  }

  void fill(std::string_view text, const SpecDtype& dtype, TensorSpec& spec) const {
    const bool numeric = dtype.cls == DtypeClass::Integer || dtype.cls == DtypeClass::Bool;
    const size_t eq = text.find('=');
    const std::string_view name = text.substr(0, eq);
    const std::string_view arg = eq == std::string_view::npos ? std::string_view() : text.substr(eq + 1);
    const bool has_arg = eq != std::string_view::npos;
    const bool wants_arg = name == "full" || name == "randint";
    if (has_arg != wants_arg && (wants_arg || name == "normal" || name == "uniform" || name == "zeros" ||
                                 name == "ones" || name == "range")) {
      fail(wants_arg ? "fill \"" + std::string(name) + "\" needs a value (" + std::string(name) +
                           (name == "full" ? "=V)" : "=LOW,HIGH)")
                     : "fill \"" + std::string(name) + "\" takes no value",
           kFillHint);
    }
    if (name == "normal" || name == "uniform") {
      if (numeric) {
        fail("fill \"" + std::string(name) + "\" makes no sense for " + spec.dtype,
             "integer and bool tensors take zeros, ones, range, full=V or randint=LOW,HIGH");
      }
      spec.fill = name == "normal" ? TensorFill::Normal : TensorFill::Uniform;
    } else if (name == "zeros") {
      spec.fill = TensorFill::Zeros;
    } else if (name == "ones") {
      spec.fill = TensorFill::Ones;
    } else if (name == "range") {
      if (dtype.cls == DtypeClass::Bool) fail("fill \"range\" makes no sense for bool", kFillHint);
      spec.fill = TensorFill::Range;
    } else if (name == "full") {
      spec.fill = TensorFill::Full;
      spec.full_value = full_value(arg, dtype);
    } else if (name == "randint") {
      spec.fill = TensorFill::RandInt;
      randint(arg, dtype, spec);
    } else {
      fail("unknown fill \"" + std::string(text) + "\"", kFillHint);
    }
  }

  double full_value(std::string_view arg, const SpecDtype& dtype) const {
    double v = 0;
    const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
    if (arg.empty() || ec != std::errc() || end != arg.data() + arg.size()) {
      fail("\"" + std::string(arg) + "\" in full=V is not a number", kFillHint);
    }
    if (dtype.cls == DtypeClass::Integer || dtype.cls == DtypeClass::Bool) {
      // Every int64 bound is exactly representable as a double except max;
      // v < 2^63 keeps the cast below defined.
      if (!std::isfinite(v) || v != std::floor(v) || v < static_cast<double>(dtype.min) ||
          v >= 9223372036854775808.0 || static_cast<int64_t>(v) > dtype.max) {
        fail("full=" + std::string(arg) + " is not a value of " + std::string(dtype.canonical),
             dtype.cls == DtypeClass::Bool ? "bool tensors take full=0 or full=1"
                                           : "integer tensors take whole numbers within the dtype's range");
      }
    }
    return v;
  }

  void randint(std::string_view arg, const SpecDtype& dtype, TensorSpec& spec) const {
    const size_t comma = arg.find(',');
    if (comma == std::string_view::npos) fail("randint needs two bounds, randint=LOW,HIGH", kFillHint);
    spec.low = integer(arg.substr(0, comma), "randint");
    spec.high = integer(arg.substr(comma + 1), "randint");
    if (spec.low >= spec.high) {
      fail("randint=" + std::string(arg) + " is empty: LOW must be less than HIGH (HIGH is exclusive)", kFillHint);
    }
    if (dtype.cls == DtypeClass::Complex) fail("fill \"randint\" makes no sense for " + spec.dtype, kFillHint);
    if (dtype.cls == DtypeClass::Integer || dtype.cls == DtypeClass::Bool) {
      // high is exclusive: high - 1 must be a value of the dtype.
      if (spec.low < dtype.min || spec.high - 1 > dtype.max) {
        fail("randint=" + std::string(arg) + " draws values that " + std::string(dtype.canonical) + " cannot hold",
             "the range must lie within the dtype's values, e.g. randint=0,2 for bool, randint=0,256 for uint8");
      }
    }
  }

  int64_t integer(std::string_view s, const char* fill_name) const {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      fail("\"" + std::string(s) + "\" in " + fill_name + " is not a 64-bit integer", kFillHint);
    }
    return v;
  }

  std::string_view text_;
};

// json:TEXT --------------------------------------------------------------------

[[noreturn]] void fail_json(const std::string& why) {
  throw_usage("bad json input: " + why,
              "json:TEXT takes JSON numbers, true/false, null, strings, arrays and objects, e.g. json:[1,2.5,true]");
}

// nlohmann's parser is not recursive, but converting and destroying deep
// trees is; refuse deep nesting before parsing (the shared pre-scan of
// bounded_json.h, with this argument's own, lower, depth limit).
void check_json_depth(std::string_view text) {
  if (auto problem = json_limit_problem(text, kMaxJsonDepth, kMaxInputFileBytes)) fail_json(*problem);
}

HostValue parse_json_argument(std::string_view text) {
  check_json_depth(text);
  // Ordered: a Dict[str, T] argument keeps the object's key order, as
  // Python's json.loads and TorchScript's dicts (insertion-ordered) do.
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string msg = e.what();
    const size_t at = msg.find("parse error");
    fail_json(at == std::string::npos ? msg : msg.substr(at));
  }
  return host_value_of_json(j);
}

// @FILE ------------------------------------------------------------------------

HostValue read_input_file(const std::string& path, InputBudget& budget) {
  std::unique_ptr<ByteSource> source;
  try {
    source = open_file_source(path);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Io) throw;
    throw Error(ErrorKind::Io, std::string("cannot read input file: ") + e.what(), path,
                "@FILE names a .npy file or a torch.save file");
  }
  // Read by offset: what the file's tensors take in memory is held to the
  // budget by its reader, from what it declares, before it reads them (a
  // mistaken path, a disk image, is refused on its first bytes).
  char head[6] = {};
  const size_t n = source->size() < sizeof head ? static_cast<size_t>(source->size()) : sizeof head;
  source->read_at(0, head, n);
  HostValue v;
  if (n == 6 && std::string_view(head, 6) == "\x93NUMPY") {
    v.kind = HostValue::Kind::Tensor;
    v.tensor = read_npy(*source, budget);
    return v;
  }
  if (n >= 4 && std::string_view(head, 4) == "PK\x03\x04") return read_torch_save_value(*source, budget);
  const FileKind kind = detect_file_kind(*source);
  std::string what = "input file is neither a .npy file nor a torch.save file";
  if (kind != FileKind::NotAModel) what += std::string(": it is a ") + std::string(file_kind_name(kind));
  throw_bad_input(what, path,
                  kind == FileKind::LegacyTorchSave || kind == FileKind::LegacyTar
                      ? "load it in Python and torch.save it again with PyTorch 1.6 or newer"
                      : "save the input with numpy.save (.npy) or torch.save (.pt)");
}

std::string shorten(const std::string& text) {
  if (text.size() <= kMaxOriginChars) return text;
  return text.substr(0, kMaxOriginChars - 3) + "...";
}

}  // namespace

namespace {

// One conversion for both JSON types: nlohmann::json (sorted objects) and
// ordered_json (objects in the text's order, as Python's json keeps them).
template <typename Json>
HostValue host_value_from_json(const Json& j) {
  using json = Json;
  HostValue v;
  switch (j.type()) {
    case json::value_t::null: v.kind = HostValue::Kind::None; break;
    case json::value_t::boolean:
      v.kind = HostValue::Kind::Bool;
      v.boolean = j.template get<bool>();
      break;
    case json::value_t::number_integer:
      v.kind = HostValue::Kind::Int;
      v.integer = j.template get<int64_t>();
      break;
    case json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail_json("integer " + std::to_string(u) + " does not fit in 64 bits (int64)");
      }
      v.kind = HostValue::Kind::Int;
      v.integer = static_cast<int64_t>(u);
      break;
    }
    case json::value_t::number_float:
      v.kind = HostValue::Kind::Float;
      v.real = j.template get<double>();
      break;
    case json::value_t::string:
      v.kind = HostValue::Kind::String;
      v.string = j.template get<std::string>();
      break;
    case json::value_t::array:
      v.kind = HostValue::Kind::List;
      v.items.reserve(j.size());
      for (const json& item : j) v.items.push_back(host_value_from_json(item));
      break;
    case json::value_t::object:
      v.kind = HostValue::Kind::Dict;
      for (auto it = j.begin(); it != j.end(); ++it) v.entries.emplace_back(it.key(), host_value_from_json(it.value()));
      break;
    default: fail_json("unsupported JSON value (binary)");
  }
  return v;
}

}  // namespace

HostValue host_value_of_json(const nlohmann::json& j) { return host_value_from_json(j); }
HostValue host_value_of_json(const nlohmann::ordered_json& j) { return host_value_from_json(j); }

TensorSpec parse_tensor_spec(std::string_view text) { return SpecParser(text).parse(); }

InputBudget::InputBudget(uint64_t limit, std::string source, std::string hint, std::string held)
    : limit_(limit), source_(std::move(source)), hint_(std::move(hint)), held_(std::move(held)) {}

void InputBudget::refuse(const std::string& what, const std::string& file) const {
  throw_bad_input(what + ", more than the " + human_size(limit_) + " that " + held_ + " may take in memory (" + source_ + ")",
                  file, hint_);
}

void InputBudget::take(uint64_t bytes, const std::string& what, const std::string& file) {
  uint64_t total = 0;
  if (add_overflows(used_, bytes, &total) || total > limit_) {
    refuse(what + " would take " + human_size(bytes) +
               (used_ > 0 ? " beside the " + human_size(used_) + " of the " + held_ + " before it" : ""),
           file);
  }
  used_ = total;
}

HostValue parse_input_argument(const std::string& text) {
  InputBudget budget;
  return parse_input_argument(text, budget);
}

HostValue parse_input_argument(const std::string& text, InputBudget& budget) {
  HostValue v;
  if (!text.empty() && text[0] == '@') {
    if (text.size() == 1) throw_usage("input \"@\" names no file", "write @PATH, e.g. @image.npy");
    if (auto image = read_image_argument(text.substr(1), ImageLimits(), &budget)) {
      v.kind = HostValue::Kind::Tensor;
      v.tensor = std::move(*image);
    } else {
      v = read_input_file(text.substr(1), budget);
    }
  } else if (text.rfind("json:", 0) == 0) {
    v = parse_json_argument(std::string_view(text).substr(5));
  } else {
    v.kind = HostValue::Kind::Spec;
    v.spec = parse_tensor_spec(text);
  }
  v.origin = shorten(text);
  return v;
}

}  // namespace tsarchive
