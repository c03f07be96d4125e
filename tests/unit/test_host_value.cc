// Inputs of `tsarchive run`: tensor specs, json:, .npy and torch.save files.
// File values are compared with testdata/inputs/expected.json, which
// scripts/make_input_files.py writes from what NumPy and PyTorch read back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "base/error.h"
#include "contract/host_value.h"
#include "core/inputs/input_values.h"
#include "format/archive.h"
#include "format/model.h"
#include "format/pickle.h"
#include "core/compare/tensor_values.h"
#include "format/zip.h"
#include "format/zip_writer.h"

using namespace tsarchive;
using Kind = HostValue::Kind;
using nlohmann::json;

namespace {

std::string input(const std::string& name) { return testdata("inputs/" + name); }

const json& expected_inputs() {
  static const json j = json::parse(slurp(input("expected.json")));
  return j;
}

// One element of a HostTensor at a logical index: integers and bools exactly,
// floating types as double, complex as (re, im).
struct Element {
  bool integral = false;
  int64_t integer = 0;
  double re = 0, im = 0;
};

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Element element_at(const HostTensor& t, const std::vector<int64_t>& index) {
  uint64_t size = 0;
  REQUIRE(dtype_element_size(t.dtype, &size));
  int64_t e = t.offset;
  for (size_t d = 0; d < index.size(); ++d) e += index[d] * t.stride[d];
  REQUIRE((static_cast<uint64_t>(e) + 1) * size <= t.bytes->size());
  const char* p = t.bytes->data() + static_cast<uint64_t>(e) * size;
  Element x;
  const std::string& d = t.dtype;
  x.integral = d == "bool" || d == "uint8" || d.rfind("int", 0) == 0;
  if (d == "bool" || d == "uint8") x.integer = static_cast<uint8_t>(*p);
  else if (d == "int8") x.integer = static_cast<int8_t>(*p);
  else if (d == "int16") x.integer = load<int16_t>(p);
  else if (d == "int32") x.integer = load<int32_t>(p);
  else if (d == "int64") x.integer = load<int64_t>(p);
  else if (d == "float16") x.re = half_to_double(load<uint16_t>(p));
  else if (d == "bfloat16") x.re = bfloat16_to_double(load<uint16_t>(p));
  else if (d == "float32") x.re = load<float>(p);
  else if (d == "float64") x.re = load<double>(p);
  else if (d == "complex64") x.re = load<float>(p), x.im = load<float>(p + 4);
  else if (d == "complex128") x.re = load<double>(p), x.im = load<double>(p + 8);
  else FAIL("no decoder for " << d);
  return x;
}

// All elements in C order.
std::vector<Element> elements(const HostTensor& t) {
  std::vector<Element> out;
  uint64_t numel = 1;
  for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
  std::vector<int64_t> index(t.shape.size(), 0);
  for (uint64_t n = 0; n < numel; ++n) {
    out.push_back(element_at(t, index));
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

void check_value(const HostValue& v, const json& want, const std::string& where) {
  INFO(where);
  if (want.contains("tensor")) {
    REQUIRE(v.kind == Kind::Tensor);
    CHECK(v.tensor.dtype == want["tensor"].get<std::string>());
    CHECK(v.tensor.shape == want["shape"].get<std::vector<int64_t>>());
    if (want.contains("stride")) {
      CHECK(v.tensor.stride == want["stride"].get<std::vector<int64_t>>());
      CHECK(v.tensor.offset == want["offset"].get<int64_t>());
    }
    const std::vector<Element> got = elements(v.tensor);
    const json& values = want["values"];
    REQUIRE(got.size() == values.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      if (values[i].is_array()) {
        CHECK(got[i].re == values[i][0].get<double>());
        CHECK(got[i].im == values[i][1].get<double>());
      } else if (values[i].is_boolean()) {
        CHECK(got[i].integer == (values[i].get<bool>() ? 1 : 0));
      } else if (got[i].integral) {
        CHECK(got[i].integer == values[i].get<int64_t>());
      } else {
        CHECK(got[i].re == values[i].get<double>());
      }
    }
  } else if (want.contains("list")) {
    REQUIRE(v.kind == Kind::List);
    REQUIRE(v.items.size() == want["list"].size());
    for (size_t i = 0; i < v.items.size(); ++i) check_value(v.items[i], want["list"][i], where + "[" + std::to_string(i) + "]");
  } else if (want.contains("dict")) {
    REQUIRE(v.kind == Kind::Dict);
    REQUIRE(v.entries.size() == want["dict"].size());
    for (size_t i = 0; i < v.entries.size(); ++i) {
      CHECK(v.entries[i].first == want["dict"][i][0].get<std::string>());
      check_value(v.entries[i].second, want["dict"][i][1], where + "." + v.entries[i].first);
    }
  } else {
    const json& s = want["scalar"];
    if (s.is_null()) CHECK(v.kind == Kind::None);
    else if (s.is_boolean()) CHECK((v.kind == Kind::Bool && v.boolean == s.get<bool>()));
    else if (s.is_number_integer()) CHECK((v.kind == Kind::Int && v.integer == s.get<int64_t>()));
    else if (s.is_number_float()) CHECK((v.kind == Kind::Float && v.real == s.get<double>()));
    else CHECK((v.kind == Kind::String && v.string == s.get<std::string>()));
  }
}

Error spec_error(const std::string& text, const std::string& what) {
  INFO("spec " << text);
  return error_of([&] { parse_tensor_spec(text); }, ErrorKind::Usage, what);
}

HostValue read_file(const std::string& name) { return parse_input_argument("@" + input(name)); }

HostTensor npy_from(const std::string& header, const std::string& data) {
  std::string h = header;
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(h.size() & 0xff);
  bytes += static_cast<char>(h.size() >> 8);
  return read_npy(*make_memory_source(bytes + h + data, "mem.npy"));
}

}  // namespace

// --- specs --------------------------------------------------------------------

TEST_CASE("spec: shape only means float32 normal") {
  const TensorSpec s = parse_tensor_spec("1x3x224x224");
  CHECK(s.shape == std::vector<int64_t>{1, 3, 224, 224});
  CHECK(s.dtype == "float32");
  CHECK(s.fill == TensorFill::Normal);
  CHECK(s.text == "1x3x224x224");
  CHECK(parse_tensor_spec("0x3").shape == std::vector<int64_t>{0, 3});
  CHECK(parse_tensor_spec("7").shape == std::vector<int64_t>{7});
  CHECK(parse_tensor_spec("scalar").shape.empty());
  CHECK(parse_tensor_spec("2147483648").shape == std::vector<int64_t>{int64_t{1} << 31});
}

TEST_CASE("spec: dtypes, aliases and their default fills") {
  CHECK(parse_tensor_spec("scalar:float64").dtype == "float64");
  CHECK(parse_tensor_spec("scalar:float64").fill == TensorFill::Normal);
  const std::pair<const char*, const char*> aliases[] = {
      {"float", "float32"}, {"double", "float64"}, {"half", "float16"}, {"long", "int64"}, {"int", "int32"}};
  for (const auto& [alias, name] : aliases) CHECK(parse_tensor_spec(std::string("2:") + alias).dtype == name);
  for (const char* d : {"float16", "bfloat16", "complex64", "complex128"}) {
    CHECK(parse_tensor_spec(std::string("2:") + d).fill == TensorFill::Normal);
  }
  for (const char* d : {"int64", "int32", "int16", "int8", "uint8"}) {
    const TensorSpec s = parse_tensor_spec(std::string("2:") + d);
    CHECK(s.dtype == d);
    CHECK(s.fill == TensorFill::RandInt);
    CHECK((s.low == 0 && s.high == 10));
  }
  const TensorSpec b = parse_tensor_spec("4:bool");
  CHECK(b.fill == TensorFill::RandInt);
  CHECK((b.low == 0 && b.high == 2));
}

TEST_CASE("spec: every fill") {
  CHECK(parse_tensor_spec("8x128:int64:zeros").fill == TensorFill::Zeros);
  CHECK(parse_tensor_spec("2x3:float16:ones").fill == TensorFill::Ones);
  CHECK(parse_tensor_spec("16:int64:range").fill == TensorFill::Range);
  CHECK(parse_tensor_spec("2:float32:uniform").fill == TensorFill::Uniform);
  CHECK(parse_tensor_spec("2:complex64:normal").fill == TensorFill::Normal);
  const TensorSpec full = parse_tensor_spec("2:float32:full=-2.5e-1");
  CHECK(full.fill == TensorFill::Full);
  CHECK(full.full_value == -0.25);
  CHECK(parse_tensor_spec("2:int32:full=-7").full_value == -7);
  CHECK(parse_tensor_spec("2:bool:full=1").full_value == 1);
  const TensorSpec r = parse_tensor_spec("3x3:int8:randint=-128,128");
  CHECK(r.fill == TensorFill::RandInt);
  CHECK((r.low == -128 && r.high == 128));
  CHECK(parse_tensor_spec("3:float32:randint=0,5").fill == TensorFill::RandInt);
  CHECK(parse_tensor_spec("3:bool:randint=0,2").high == 2);
}

TEST_CASE("spec: bad shapes are usage errors naming the part") {
  const Error e = spec_error("1xx3", "bad input spec \"1xx3\": empty dimension in shape \"1xx3\"");
  CHECK_THAT(e.hint(), Catch::Contains("SHAPE[:DTYPE[:FILL]]"));
  spec_error("", "the shape is empty");
  spec_error(":float32", "the shape is empty");
  spec_error("1x3x", "empty dimension");
  spec_error("x3", "empty dimension");
  spec_error("-1x3", "negative dimension \"-1\"");
  spec_error("2x-3", "negative dimension \"-3\"");
  spec_error("1x3a", "\"3a\" in shape \"1x3a\" is not a dimension");
  spec_error("+1", "is not a dimension");
  spec_error("1 x3", "is not a dimension");
  spec_error("1X3", "is not a dimension");
  spec_error("Scalar", "is not a dimension");
  spec_error("2147483649", "dimension 2147483649 is larger than 2^31");
  spec_error("99999999999999999999999999", "is larger than 2^31");
  spec_error("65536x65536", "more than 2^31 elements");
  spec_error("2x3:float32:zeros:junk", "unexpected \":junk\" after the fill");
}

TEST_CASE("spec: bad dtypes and fills are usage errors listing the accepted ones") {
  const Error e = spec_error("1x3:flaot32", "bad input spec \"1x3:flaot32\": unknown dtype \"flaot32\"");
  CHECK_THAT(e.hint(), Catch::Contains("float32") && Catch::Contains("complex128") && Catch::Contains("long"));
  spec_error("1x3:", "the dtype is empty");
  spec_error("1x3::zeros", "the dtype is empty");
  spec_error("1x3:Float32", "unknown dtype \"Float32\"");
  spec_error("1x3:uint16", "unknown dtype \"uint16\"");
  const Error f = spec_error("1x3:float32:sparkle", "unknown fill \"sparkle\"");
  CHECK_THAT(f.hint(), Catch::Contains("randint=LOW,HIGH"));
  spec_error("1x3:bool:range", "fill \"range\" makes no sense for bool");
  spec_error("1x3:int64:normal", "fill \"normal\" makes no sense for int64");
  spec_error("1x3:bool:uniform", "fill \"uniform\" makes no sense for bool");
  spec_error("1x3:float32:full", "fill \"full\" needs a value");
  spec_error("1x3:float32:randint", "fill \"randint\" needs a value");
  spec_error("1x3:float32:zeros=1", "fill \"zeros\" takes no value");
  spec_error("1x3:float32:full=abc", "\"abc\" in full=V is not a number");
  spec_error("1x3:float32:full=", "\"\" in full=V is not a number");
  spec_error("1x3:float32:full=1.5x", "is not a number");
  spec_error("1x3:int64:full=1.5", "full=1.5 is not a value of int64");
  spec_error("1x3:uint8:full=256", "full=256 is not a value of uint8");
  spec_error("1x3:int64:full=1e300", "is not a value of int64");
  spec_error("1x3:bool:full=2", "full=2 is not a value of bool");
  spec_error("1x3:int64:randint=5,5", "randint=5,5 is empty: LOW must be less than HIGH");
  spec_error("1x3:int64:randint=9,2", "LOW must be less than HIGH");
  spec_error("1x3:int64:randint=5", "randint needs two bounds");
  spec_error("1x3:int64:randint=a,5", "\"a\" in randint is not a 64-bit integer");
  spec_error("1x3:int64:randint=0,99999999999999999999", "is not a 64-bit integer");
  spec_error("1x3:uint8:randint=0,300", "draws values that uint8 cannot hold");
  spec_error("1x3:uint8:randint=-1,3", "cannot hold");
  spec_error("1x3:bool:randint=0,3", "draws values that bool cannot hold");
  spec_error("1x3:complex64:randint=0,3", "fill \"randint\" makes no sense for complex64");
}

// --- input arguments ----------------------------------------------------------

TEST_CASE("input: a spec argument") {
  const HostValue v = parse_input_argument("2x3:int64:range");
  CHECK(v.kind == Kind::Spec);
  CHECK(v.spec.shape == std::vector<int64_t>{2, 3});
  CHECK(v.origin == "2x3:int64:range");
  CHECK_THROWS_AS(parse_input_argument("2x3:nope"), Error);
}

TEST_CASE("input: json values map to host values") {
  const HostValue v = parse_input_argument(
      R"(json:[1, -2, 2.5, true, false, null, "1x3:int64", [], {"k": [9223372036854775807]}, 1e3])");
  REQUIRE(v.kind == Kind::List);
  CHECK_FALSE(v.spreads);
  REQUIRE(v.items.size() == 10);
  CHECK((v.items[0].kind == Kind::Int && v.items[0].integer == 1));
  CHECK((v.items[1].kind == Kind::Int && v.items[1].integer == -2));
  CHECK((v.items[2].kind == Kind::Float && v.items[2].real == 2.5));
  CHECK((v.items[3].kind == Kind::Bool && v.items[3].boolean));
  CHECK((v.items[4].kind == Kind::Bool && !v.items[4].boolean));
  CHECK(v.items[5].kind == Kind::None);
  CHECK((v.items[6].kind == Kind::String && v.items[6].string == "1x3:int64"));
  CHECK((v.items[7].kind == Kind::List && v.items[7].items.empty()));
  REQUIRE(v.items[8].kind == Kind::Dict);
  CHECK(v.items[8].entries[0].first == "k");
  CHECK(v.items[8].entries[0].second.items[0].integer == INT64_MAX);
  CHECK((v.items[9].kind == Kind::Float && v.items[9].real == 1000));
  CHECK(parse_input_argument("json:3").kind == Kind::Int);
  CHECK(parse_input_argument("json:\"s\"").string == "s");
}

TEST_CASE("input: bad json is a usage error naming the position") {
  error_of([] { parse_input_argument("json:[1,"); }, ErrorKind::Usage, "bad json input: parse error at line 1, column");
  error_of([] { parse_input_argument("json:"); }, ErrorKind::Usage, "parse error");
  error_of([] { parse_input_argument("json:{'a': 1}"); }, ErrorKind::Usage, "column 2");
  error_of([] { parse_input_argument("json:18446744073709551615"); }, ErrorKind::Usage,
           "integer 18446744073709551615 does not fit in 64 bits");
  error_of([] { parse_input_argument("json:" + std::string(65, '[') + std::string(65, ']')); }, ErrorKind::Usage,
           "nested deeper than 64 levels");
  // Brackets inside strings do not count.
  CHECK(parse_input_argument("json:\"" + std::string(100, '[') + "\"").kind == Kind::String);
  CHECK(parse_input_argument("json:" + std::string(64, '[') + std::string(64, ']')).kind == Kind::List);
}

TEST_CASE("input: origin is the argument, shortened") {
  const std::string long_json = "json:[" + std::string(100, '1') + "]";
  const HostValue v = parse_input_argument("json:[" + std::string(30, ' ') + "1" + std::string(60, ' ') + "]");
  CHECK(v.origin.size() == 60);
  CHECK(v.origin.substr(57) == "...");
  CHECK(read_file("f4_c.npy").origin.substr(0, 1) == "@");
}

TEST_CASE("input: @FILE errors") {
  error_of([] { parse_input_argument("@"); }, ErrorKind::Usage, "names no file");
  const Error e = error_of([] { parse_input_argument("@/nonexistent/x.npy"); }, ErrorKind::Io, "cannot read input file");
  CHECK(e.file() == "/nonexistent/x.npy");
  error_of([] { parse_input_argument("@" + testdata("model.onnx")); }, ErrorKind::BadInput,
           "neither a .npy file nor a torch.save file: it is a ONNX");
  error_of([] { parse_input_argument("@" + testdata("hostile/empty.pt")); }, ErrorKind::BadInput,
           "neither a .npy file nor a torch.save file");
  error_of([] { parse_input_argument("@" + testdata("legacy_state_dict.pth")); }, ErrorKind::BadInput, "legacy");
  const Error ts = error_of([] { parse_input_argument("@" + testdata("mlp_scripted.pt")); }, ErrorKind::BadInput,
                            "not a torch.save file: it is a TorchScript archive");
  CHECK(ts.file() == testdata("mlp_scripted.pt"));
}

// --- .npy ---------------------------------------------------------------------

TEST_CASE("npy: every readable file decodes to what NumPy reads") {
  size_t checked = 0;
  for (const auto& [name, want] : expected_inputs().items()) {
    if (name.size() < 4 || name.substr(name.size() - 4) != ".npy") continue;
    const HostValue v = read_file(name);
    check_value(v, want, name);
    ++checked;
  }
  CHECK(checked >= 9);  // testdata/inputs/expected.json lists every .npy make_input_testdata.py writes
}

TEST_CASE("npy: layouts") {
  const HostTensor f = read_file("f8_fortran.npy").tensor;
  CHECK(f.shape == std::vector<int64_t>{3, 4});
  CHECK(f.stride == std::vector<int64_t>{1, 3});
  const HostTensor c = read_file("f4_c.npy").tensor;
  CHECK(c.stride == std::vector<int64_t>{3, 1});
  const HostTensor s = read_file("i8_scalar.npy").tensor;
  CHECK(s.shape.empty());
  CHECK(s.stride.empty());
  CHECK(read_file("u1_empty.npy").tensor.bytes->empty());
}

TEST_CASE("npy: unsupported dtypes are refused by name") {
  const Error u = error_of([] { read_file("u2.npy"); }, ErrorKind::BadInput, "'<u2' (uint16), which has no torch dtype");
  CHECK_THAT(u.hint(), Catch::Contains("astype"));
  CHECK(u.file() == input("u2.npy"));
  error_of([] { read_file("object.npy"); }, ErrorKind::BadInput, "'|O' (Python objects)");
  error_of([] { npy_from("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }\n", std::string(12, 'a')); },
           ErrorKind::BadInput, "(strings)");
  error_of([] { npy_from("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,), }\n", std::string(8, 0)); },
           ErrorKind::BadInput, "(datetimes)");
  error_of([] { npy_from("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", std::string(4, 0)); },
           ErrorKind::BadInput, "structured dtype");
  error_of([] { npy_from("{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }\n", std::string(16, 0)); },
           ErrorKind::BadInput, "a type torch does not have");
  // A NUL in the descr used to end the message there, losing what is wrong.
  const Error nul = error_of(
      [] { npy_from(std::string("{'descr': '<f4\0x', 'fortran_order': False, 'shape': (1, 4), }\n", 62), std::string(16, 0)); },
      ErrorKind::BadInput, "'<f4\\x00x' (a type torch does not have), which cannot be a tensor");
  CHECK(nul.file() == "mem.npy");
}

TEST_CASE("npy: damaged files are refused, never read past") {
  error_of([] { read_file("truncated.npy"); }, ErrorKind::BadInput, "(24 bytes of data), but 19 bytes follow it");
  error_of([] { read_file("lying_header.npy"); }, ErrorKind::BadInput, "declares shape (3, 3) of <f4 (36 bytes of data)");
  error_of([] { read_file("header_past_eof.npy"); }, ErrorKind::BadInput, "claims 32767 bytes, past the end");
  // 2^62 elements of 4 bytes: refused from the header, before any allocation.
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 2147483648), }\n", ""); },
           ErrorKind::BadInput, "(more than 2^64 bytes of data)");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", ""); },
           ErrorKind::BadInput, "more elements than 64 bits count");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", ""); },
           ErrorKind::BadInput, "does not fit in 64 bits");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n", ""); }, ErrorKind::BadInput,
           "expected a non-negative dimension");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", ""); },
           ErrorKind::BadInput, "unknown key 'x'");
  error_of([] { npy_from("{'descr': '<f4', 'shape': (1,), }\n", std::string(4, 0)); }, ErrorKind::BadInput,
           "a key is missing");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }\n", std::string(4, 0)); },
           ErrorKind::BadInput, "expected True or False");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x\n", std::string(4, 0)); },
           ErrorKind::BadInput, "unexpected text after the dict");
  error_of([] { npy_from("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, 0)); },
           ErrorKind::BadInput, "does not end with a newline");
  error_of([] { npy_from("{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }\n", std::string(4, 0)); },
           ErrorKind::BadInput, "invalid .npy header");
  error_of([] { read_npy(*make_memory_source(std::string("\x93NUMPY\x04\x00\x00\x00", 10))); }, ErrorKind::BadInput,
           "format version 4 is not supported");
  error_of([] { read_npy(*make_memory_source("\x93NUMP")); }, ErrorKind::BadInput, "not a .npy file");

  // Every prefix of a valid file fails cleanly.
  const std::string good = slurp(input("c8_big.npy"));
  for (size_t n = 0; n < good.size(); ++n) {
    CHECK_THROWS_AS(read_npy(*make_memory_source(good.substr(0, n))), Error);
  }
}

TEST_CASE("npy: any byte of the preamble and header changed is read or refused, never more") {
  const std::string good = slurp(input("f8_fortran.npy"));
  const size_t data_start = good.size() - 12 * 8;
  for (size_t i = 0; i < data_start; ++i) {
    for (char c : {'\0', '\xff', '9', '(', ')', ',', '\'', '>', 'c', '\n'}) {
      std::string bad = good;
      bad[i] = c;
      try {
        const HostTensor t = read_npy(*make_memory_source(bad));
        uint64_t numel = 0, end = 0, size = 0;
        REQUIRE(dtype_element_size(t.dtype, &size));
        REQUIRE(tensor_extent(t.shape, t.stride, t.offset, &numel, &end));
        CHECK(end * size <= t.bytes->size());
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::BadInput);
      }
    }
  }
}

TEST_CASE("npy: version 2 and 3 headers") {
  const std::string good = slurp(input("f4_c.npy"));
  const uint16_t length = static_cast<uint16_t>(static_cast<uint8_t>(good[8]) | static_cast<uint8_t>(good[9]) << 8);
  for (char major : {'\x02', '\x03'}) {
    std::string v = good.substr(0, 6) + major + '\0' + std::string{static_cast<char>(length & 0xff),
                                                                    static_cast<char>(length >> 8), 0, 0};
    v += good.substr(10);
    const HostTensor t = read_npy(*make_memory_source(v));
    CHECK(t.shape == std::vector<int64_t>{2, 3});
  }
}

TEST_CASE("npy: write_npy is numpy.save's layout, and round-trips") {
  // Byte-identical to NumPy's own file for a C-order array.
  const std::string numpy_bytes = slurp(input("f4_c.npy"));
  CHECK(write_npy(read_npy(*make_memory_source(numpy_bytes))) == numpy_bytes);

  for (const char* name : {"f8_fortran.npy", "i4_big.npy", "c8_big.npy", "bool.npy", "i8_scalar.npy", "c8.npy",
                           "f2.npy", "u1_empty.npy"}) {
    INFO(name);
    const HostTensor a = read_file(name).tensor;
    const std::string written = write_npy(a);
    uint64_t size = 0;
    dtype_element_size(a.dtype, &size);
    CHECK((written.size() - elements(a).size() * size) % 64 == 0);  // data starts 64-byte aligned
    const HostTensor b = read_npy(*make_memory_source(written));
    CHECK(b.dtype == a.dtype);
    CHECK(b.shape == a.shape);
    HostValue bv;
    bv.kind = Kind::Tensor;
    bv.tensor = b;
    check_value(bv, expected_inputs()[name], name);
  }
}

TEST_CASE("npy: write_npy materializes views") {
  HostTensor t;
  t.dtype = "int16";
  t.shape = {2, 2};
  t.stride = {1, 3};  // transposed, skipping elements
  t.offset = 1;
  std::string bytes;
  for (int16_t i = 0; i < 8; ++i) bytes.append(reinterpret_cast<const char*>(&i), 2);
  t.bytes = std::make_shared<const std::string>(bytes);
  const HostTensor back = read_npy(*make_memory_source(write_npy(t)));
  CHECK(back.stride == std::vector<int64_t>{2, 1});
  const std::vector<Element> e = elements(back);
  REQUIRE(e.size() == 4);
  CHECK((e[0].integer == 1 && e[1].integer == 4 && e[2].integer == 2 && e[3].integer == 5));

  t.offset = 4;  // reaches element 8 of 8
  error_of([&] { write_npy(t); }, ErrorKind::BadInput, "view reaches past its 16 bytes");
  t.offset = 0;
  t.stride = {1};
  error_of([&] { write_npy(t); }, ErrorKind::BadInput, "view reaches past");

  // A broadcast of one element to 2^40: refused before writing anything.
  t.shape = {int64_t{1} << 20, int64_t{1} << 20};
  t.stride = {0, 0};
  error_of([&] { write_npy(t); }, ErrorKind::BadInput, "too large for a .npy file");

  // No elements, whatever the other dims (but strides must fit to read it back).
  t.shape = {0, int64_t{1} << 40, int64_t{1} << 20};
  t.stride = {1, 1, 1};
  CHECK(read_npy(*make_memory_source(write_npy(t))).shape == t.shape);
  t.shape = {0, int64_t{1} << 40, int64_t{1} << 40};
  error_of([&] { read_npy(*make_memory_source(write_npy(t))); }, ErrorKind::BadInput, "too large for 64-bit strides");

  // Contiguous with an offset: copied in one piece.
  t.shape = {3};
  t.stride = {1};
  t.offset = 5;
  const std::vector<Element> tail = elements(read_npy(*make_memory_source(write_npy(t))));
  REQUIRE(tail.size() == 3);
  CHECK((tail[0].integer == 5 && tail[2].integer == 7));
}

TEST_CASE("npy: types NumPy lacks are refused with a way out") {
  for (const char* dtype : {"bfloat16", "complex32", "qint8", "quint8", "float8_e4m3fn"}) {
    HostTensor t;
    t.dtype = dtype;
    t.shape = {1};
    t.stride = {1};
    t.bytes = std::make_shared<const std::string>(4, '\0');
    const Error e = error_of([&] { write_npy(t); }, ErrorKind::Usage, std::string("a ") + dtype + " tensor cannot be written as .npy");
    CHECK_THAT(e.hint(), Catch::Contains(".pt"));
  }
}

// --- torch.save -----------------------------------------------------------------

TEST_CASE("torch.save: every readable file decodes to what torch.load reads") {
  size_t checked = 0;
  for (const auto& [name, want] : expected_inputs().items()) {
    if (name.size() < 3 || name.substr(name.size() - 3) != ".pt") continue;
    ++checked;
    const HostValue v = read_file(name);
    check_value(v, want, name);
    CHECK(v.spreads == (v.kind == Kind::List));
  }
  CHECK(checked >= 9);  // testdata/inputs/expected.json lists every .pt make_input_testdata.py writes
}

TEST_CASE("torch.save: containers, spreading and shared storages") {
  const HostValue tensor = read_file("tensor.pt");
  CHECK(tensor.kind == Kind::Tensor);
  CHECK_FALSE(tensor.spreads);
  const HostValue tuple = read_file("tuple.pt");
  CHECK(tuple.kind == Kind::List);
  CHECK(tuple.spreads);
  CHECK(tuple.items.size() == 2);
  CHECK_FALSE(tuple.items[0].spreads);
  const HostValue dict = read_file("dict.pt");
  CHECK(dict.kind == Kind::Dict);
  CHECK_FALSE(dict.spreads);

  const HostValue shared = read_file("shared.pt");
  REQUIRE(shared.items.size() == 3);
  CHECK(shared.items[0].tensor.offset == 2);
  CHECK(shared.items[1].tensor.offset == 5);
  CHECK(shared.items[0].tensor.bytes == shared.items[1].tensor.bytes);  // one storage, read once
  CHECK(shared.items[0].tensor.bytes == shared.items[2].tensor.bytes);
  CHECK(shared.items[0].tensor.bytes->size() == 40);

  const HostValue transposed = read_file("transposed.pt");
  CHECK(transposed.tensor.stride == std::vector<int64_t>{1, 3});

  // A state dict (OrderedDict of tensors) from the main test data.
  const HostValue state = parse_input_argument("@" + testdata("state_dict.pth"));
  REQUIRE(state.kind == Kind::Dict);
  CHECK(state.entries.size() > 3);
  for (const auto& [key, value] : state.entries) CHECK(value.kind == Kind::Tensor);
}

TEST_CASE("torch.save: torch::pickle_save wrappers are unwrapped") {
  const HostValue list = read_file("pickle_save_tensors.pt");
  REQUIRE(list.kind == Kind::List);
  CHECK(list.spreads);
  CHECK(list.items.size() == 2);
  const HostValue tuple = read_file("pickle_save_tuple.pt");
  REQUIRE(tuple.kind == Kind::List);
  REQUIRE(tuple.items.size() == 6);
  CHECK(tuple.items[1].kind == Kind::List);  // build_intlist
  CHECK(tuple.items[2].kind == Kind::Dict);  // restore_type_tag
  CHECK(tuple.items[2].entries[0].second.tensor.stride == std::vector<int64_t>{1, 3});
}

TEST_CASE("torch.save: what run cannot take is refused by name") {
  const Error q = error_of([] { read_file("quantized.pt"); }, ErrorKind::BadInput, "a quantized tensor (qint8)");
  CHECK(q.file() == input("quantized.pt"));
  const Error s = error_of([] { read_file("short_storage.pt"); }, ErrorKind::BadInput,
                           "reaches element 3 of storage 'data/0', which holds 2");
  CHECK(s.file() == input("short_storage.pt"));
}

TEST_CASE("torch.save: damaged storages are refused") {
  const std::string good = slurp(input("tensor.pt"));
  const ZipLayout layout = read_zip_layout(*make_memory_source(good));
  const ZipEntry* data = nullptr;
  for (const ZipEntry& e : layout.entries) {
    if (e.name.size() > 7 && e.name.substr(e.name.size() - 7) == "/data/0") data = &e;
  }
  REQUIRE(data != nullptr);
  std::string bad = good;
  bad[data->data_offset] ^= 0x40;
  const Error e = error_of([&] { read_torch_save_value(*make_memory_source(bad, "bad.pt")); }, ErrorKind::BadInput,
                           "data/0");
  CHECK(e.file() == "bad.pt");

  // Every truncation fails cleanly.
  for (size_t n = 0; n < good.size(); n += 7) {
    CHECK_THROWS_AS(read_torch_save_value(*make_memory_source(good.substr(0, n))), Error);
  }
}

// The tensors of a command's input files share one budget, checked against
// what each file declares before it is read (review 55b: a 3 MB torch.save
// file whose storage deflated to 3 GB was inflated by tsarchive itself).
TEST_CASE("input budget: declared sizes are held to it, all inputs together") {
  InputBudget small(16, "half of --memory-limit 32 B", "raise it");
  const Error npy = error_of([&] { parse_input_argument("@" + input("f4_c.npy"), small); }, ErrorKind::BadInput,
                             "the .npy file's data would take 24 B, more than the 16 B that inputs may take in memory "
                             "(half of --memory-limit 32 B)");
  CHECK(npy.file() == input("f4_c.npy"));
  CHECK(npy.hint() == "raise it");
  CHECK(small.used() == 0);
  error_of([&] { parse_input_argument("@" + input("tensor.pt"), small); }, ErrorKind::BadInput,
           "the torch.save file's storage records, inflated, would take 24 B, more than the 16 B");
  error_of([&] { parse_input_argument("@" + testdata("images/gradient.png"), small); }, ErrorKind::BadInput,
           "the picture's tensor would take 36.0 KiB");
  // Two files of 24 bytes each within 40: the second is refused, counting the first.
  InputBudget both(40, "test");
  CHECK(parse_input_argument("@" + input("f4_c.npy"), both).tensor.bytes->size() == 24);
  CHECK(both.used() == 24);
  error_of([&] { parse_input_argument("@" + input("tensor.pt"), both); }, ErrorKind::BadInput,
           "would take 24 B beside the 24 B of the inputs before it, more than the 40 B");
}

// Tensors stay views over their storages; each view's elements (a broadcast
// dimension once) count against the budget's limit, a file's together.
TEST_CASE("input budget: a torch.save file's views are held to its limit") {
  // shared.pt: views [2:5], [5:] and view(2, 5) of one 10-element int32 storage: 12 + 20 + 40 bytes.
  InputBudget enough(72, "test");
  const HostValue v = parse_input_argument("@" + input("shared.pt"), enough);
  REQUIRE(v.items.size() == 3);
  CHECK(v.items[0].tensor.bytes == v.items[2].tensor.bytes);  // one storage, read once
  CHECK(enough.used() == 40);
  InputBudget less(71, "test");
  const Error e = error_of([&] { parse_input_argument("@" + input("shared.pt"), less); }, ErrorKind::BadInput,
                           "tensor [2] (sizes [2, 5], strides [5, 1]) views its storage 'data/0' of 40 B as 40 B of "
                           "elements, the file's tensors 72 B, more than the 71 B that inputs may take in memory");
  CHECK(e.file() == input("shared.pt"));
}

// data.pkl of a list that holds one string `copies` times: BINUNICODE once,
// BINPUT into the memo, then BINGET for every other copy (a
// deflated 64 MiB string so referenced 20 times took 2.78 GB).
namespace {
std::string torch_save_with_shared_string(size_t text_bytes, size_t copies) {
  std::string pkl("\x80\x02(X", 4);  // PROTO 2, MARK, BINUNICODE
  for (int i = 0; i < 4; ++i) pkl += static_cast<char>((text_bytes >> (8 * i)) & 0xFF);
  pkl += std::string(text_bytes, 'x');
  pkl += std::string("q\x01", 2);                                             // BINPUT 1
  for (size_t i = 1; i < copies; ++i) pkl += std::string("h\x01", 2);          // BINGET 1
  pkl += "l.";                                                                // LIST, STOP
  // Without tensor.pt's storage, which this pickle does not name (torch.save writes none such).
  return archive_with_record(input("tensor.pt"), "data.pkl", pkl, "data/");
}
}  // namespace

TEST_CASE("torch.save: memo references count against one byte budget") {
  // Shared a few times, as honest files do: read.
  const HostValue twice = read_torch_save_value(*make_memory_source(torch_save_with_shared_string(1 << 20, 2), "ok.pt"));
  REQUIRE(twice.items.size() == 2);
  CHECK(twice.items[1].string.size() == (1u << 20));
  // A 1 MiB string got 200 times would copy 200 MiB: refused at the budget
  // (the pickle's size plus 64 MiB), before the copies pile up.
  const std::string bomb = torch_save_with_shared_string(1 << 20, 200);
  const Error e = error_of([&] { read_torch_save_value(*make_memory_source(bomb, "bomb.pt")); }, ErrorKind::BadInput,
                           "repeated through the pickle's memo, come to more than");
  CHECK(e.file() == "bomb.pt");
}

// testdata/inputs/`name` as a big-endian PyTorch writes it: each storage's
// elements byte-reversed (complex numbers half by half, as torch.load swaps
// them back) and a byteorder record holding `order`.
namespace {
std::string with_byteorder(const std::string& name, const std::string& order, bool swap) {
  const TorchArchive archive(open_file_source(input(name)));
  ModelContents contents;
  collect_saved_object(parse_pickle(archive.read(*archive.find("data.pkl"), 1 << 20), "data.pkl"), "data", contents);
  std::vector<ZipEntrySpec> entries;
  for (const Record& r : archive.records()) {
    const auto storage = contents.storages.find(r.name);
    if (!swap || storage == contents.storages.end()) {
      entries.push_back(ZipEntrySpec::keep(*r.entry));
      continue;
    }
    uint64_t width = 0;
    REQUIRE(dtype_element_size(storage->second.dtype, &width));
    if (storage->second.dtype.rfind("complex", 0) == 0) width /= 2;
    std::string bytes = archive.read(r, 1 << 20);
    for (size_t i = 0; i + width <= bytes.size(); i += width) std::reverse(bytes.begin() + i, bytes.begin() + i + width);
    entries.push_back(ZipEntrySpec::create(archive.top_folder() + "/" + r.name, bytes));
  }
  entries.push_back(ZipEntrySpec::create(archive.top_folder() + "/byteorder", order));
  const ByteSource& source = archive.zip().source();
  const ZipRewritePlan plan = plan_zip_rewrite(source, archive.zip().layout(), entries);
  return render_plan(plan, 0, [&](uint64_t at, char* out, size_t n) { source.read_at(at, out, n); });
}
}  // namespace

// A big-endian file's values were read byte-swapped.
TEST_CASE("torch.save: the byteorder record is honoured as torch.load honours it") {
  size_t checked = 0;
  for (const auto& [name, want] : expected_inputs().items()) {
    if (name.size() < 3 || name.substr(name.size() - 3) != ".pt") continue;
    INFO(name);
    ++checked;
    for (const auto& [order, swap] : {std::pair<std::string, bool>{"big", true}, {"little", false}}) {
      const HostValue v = read_torch_save_value(*make_memory_source(with_byteorder(name, order, swap), name));
      check_value(v, want, name + " (" + order + ")");
    }
  }
  CHECK(checked >= 9);
  const Error e = error_of([] { read_torch_save_value(*make_memory_source(with_byteorder("tensor.pt", "middle", false), "m.pt")); },
                           ErrorKind::BadInput, "byteorder record holds 'middle', neither little nor big");
  CHECK(e.file() == "m.pt");
}
