#include "format/pt2.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/strings.h"
#include "format/pickle.h"

namespace tsarchive {
namespace {

using json = nlohmann::json;

constexpr std::string_view kModels = "models/";
constexpr std::string_view kWeights = "data/weights/";
constexpr std::string_view kConstants = "data/constants/";
constexpr std::string_view kSampleInputs = "data/sample_inputs/";
constexpr std::string_view kAoti = "data/aotinductor/";

// A JSON value and where it is ("models/model.json: graph_module.signature"),
// so that every complaint names the record and the place in it.
class Node {
 public:
  Node(const json& value, std::string where, const std::string& file) : value_(value), where_(std::move(where)), file_(file) {}

  const json& value() const { return value_; }
  const std::string& where() const { return where_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw_bad_input(where_ + ": " + what, file_, "the archive is damaged or was not written by torch.export");
  }
  bool has(const char* key) const { return value_.is_object() && value_.contains(key) && !value_.at(key).is_null(); }
  Node at(const char* key) const {
    if (!value_.is_object()) fail("expected an object");
    const auto it = value_.find(key);
    if (it == value_.end()) fail("has no '" + std::string(key) + "'");
    return Node(*it, where_ + "." + key, file_);
  }
  std::optional<Node> find(const std::string& key) const {
    if (!value_.is_object()) fail("expected an object");
    const auto it = value_.find(key);
    if (it == value_.end()) return std::nullopt;
    return Node(*it, where_ + "." + key, file_);
  }
  Node at(size_t i) const { return Node(value_.at(i), where_ + "[" + std::to_string(i) + "]", file_); }
  std::vector<Node> items() const {
    if (!value_.is_array()) fail("expected an array");
    std::vector<Node> out;
    out.reserve(value_.size());
    for (size_t i = 0; i < value_.size(); ++i) out.push_back(at(i));
    return out;
  }
  std::vector<std::pair<std::string, Node>> members() const {
    if (!value_.is_object()) fail("expected an object");
    std::vector<std::pair<std::string, Node>> out;
    for (auto it = value_.begin(); it != value_.end(); ++it) {
      out.emplace_back(it.key(), Node(it.value(), where_ + "." + it.key(), file_));
    }
    return out;
  }
  // The one member of a union ({"as_tensor": {...}}): its key and value.
  std::pair<std::string, Node> only_member() const {
    if (!value_.is_object() || value_.size() != 1) fail("expected an object with one member (a union)");
    return {value_.begin().key(), Node(value_.begin().value(), where_ + "." + value_.begin().key(), file_)};
  }
  std::string str() const {
    if (!value_.is_string()) fail("expected a string");
    return value_.get<std::string>();
  }
  int64_t integer() const {
    if (!value_.is_number_integer()) fail("expected an integer");
    if (value_.is_number_unsigned() && value_.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      fail("integer out of range");
    }
    return value_.get<int64_t>();
  }
  bool boolean() const {
    if (!value_.is_boolean()) fail("expected true or false");
    return value_.get<bool>();
  }

 private:
  const json& value_;
  std::string where_;
  const std::string& file_;
};

json parse_json_text(const std::string& text, uint64_t compressed_size, uint64_t limit, const std::string& record,
                     const std::string& path) {
  std::string problem;
  // Values: a parsed one costs ~100 bytes however short its text, so their
  // count follows the bytes on disk: a deflated flood of `{},` is refused,
  // while real JSON (a program of a million nodes included) deflates a few
  // times at most and passes.
  const uint64_t values = std::max<uint64_t>(JsonLimits::kValues, 8 * compressed_size);
  auto doc = parse_bounded_json(text, &problem, JsonLimits::kDepth, limit, values);
  if (!doc) throw_bad_input(record + ": " + problem, path, "the archive is damaged or was not written by torch.export");
  return std::move(*doc);
}

json parse_record(const TorchArchive& archive, const Record& r, uint64_t limit) {
  return parse_json_text(archive.read(r, limit), r.entry->compressed_size, limit, r.name, archive.path());
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  *out = a * b;
  return false;
}

// The expressions torch.export writes as expr_str, which torch.export.load
// hands to sympy.sympify (ExportedProgramDeserializer._parse_sym_expr):
// sympify runs the text through Python's eval, with sympy's names, Python's
// builtins and the deserializer's locals (torch.utils._sympy.functions, the
// symbols read so far). So the text must be what the serializer writes, and
// nothing it could call or reach is left to chance. The grammar:
//   PyTorch 2.5 and later (2.13 included) write sympy's srepr:
//     Symbol('s77', positive=True, integer=True), Integer(2), Rational(1, 2),
//     Float('1.5', precision=53), Add(..), Mul(..), FloorDiv(..), Max(..),
//     StrictLessThan(..), true, oo, -int_oo
//   earlier ones wrote str(): s0 + 2*s1, (s0//2), Max(2, s0), s0 > 4, Eq(s0, 2)
//   expr  := or;  or := and ('|' and)*;  and := not ('&' not)*;  not := '~' not | cmp
//   cmp   := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)*
//   sum   := term (('+' | '-') term)*;  term := unary (('*' | '/' | '//' | '%') unary)*
//   unary := ('-' | '+') unary | power;  power := atom ('**' unary)?
//   atom  := number | symbol | constant | '(' expr ')' | call
//   call  := Symbol|Dummy '(' 'name' (',' keyword '=' literal)* ')'
//          | Float '(' 'number' | number (',' precision '=' integer)? ')'
//          | function '(' expr (',' expr)* ')'
// A function is a sympy class srepr writes or a torch function the
// deserializer's locals name (below); a bare name a symbol (letters, then
// digits: s0, u12, zuf0) or a constant (oo, zoo, nan, int_oo, true, false,
// True, False, pi, E). Strings appear only as a symbol's name or a float's
// digits: other sympy functions sympify their string arguments, which is eval
// again. No attribute, subscript, lambda, keyword argument elsewhere or
// Python keyword passes.
class SymExprGrammar {
 public:
  explicit SymExprGrammar(std::string_view text) : s_(text) {}

  std::string problem() {
    if (s_.size() > Pt2Limits::kSymExpr) return "longer than " + std::to_string(Pt2Limits::kSymExpr) + " bytes";
    if (s_.empty()) return "empty";
    try {
      expr(0);
      skip_spaces();
      if (at_ < s_.size()) fail("'" + std::string(1, s_[at_]) + "' where the expression should end");
    } catch (const std::string& why) {
      return why;
    }
    return {};
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw why + " (at byte " + std::to_string(at_) + ")"; }
  void skip_spaces() {
    while (at_ < s_.size() && s_[at_] == ' ') ++at_;
  }
  bool accept(std::string_view op) {
    skip_spaces();
    if (s_.compare(at_, op.size(), op) != 0) return false;
    at_ += op.size();
    return true;
  }
  void expect(std::string_view op) {
    if (!accept(op)) fail("expected '" + std::string(op) + "'");
  }
  // An operator that is not the start of a longer one ('*' of '**', '/' of '//', '<' of '<=').
  bool accept_alone(std::string_view op, std::string_view not_followed_by) {
    skip_spaces();
    if (s_.compare(at_, op.size(), op) != 0) return false;
    const size_t next = at_ + op.size();
    if (next < s_.size() && not_followed_by.find(s_[next]) != std::string_view::npos) return false;
    at_ = next;
    return true;
  }
  void deeper(int depth) const {
    if (depth > Pt2Limits::kSymExprDepth) fail("nested deeper than " + std::to_string(Pt2Limits::kSymExprDepth));
  }

  void expr(int depth) {
    deeper(depth);
    do conjunction(depth);
    while (accept("|"));
  }
  void conjunction(int depth) {
    do negation(depth);
    while (accept("&"));
  }
  void negation(int depth) {
    deeper(depth);
    if (accept("~")) return negation(depth + 1);
    do sum(depth);
    while (accept("<=") || accept(">=") || accept("==") || accept("!=") || accept("<") || accept(">"));
  }
  void sum(int depth) {
    do term(depth);
    while (accept("+") || accept("-"));
  }
  void term(int depth) {
    do unary(depth);
    while (accept("//") || accept_alone("*", "*") || accept("/") || accept("%"));
  }
  void unary(int depth) {
    deeper(depth);
    if (accept("-") || accept("+")) return unary(depth + 1);
    atom(depth);
    if (accept("**")) unary(depth + 1);
  }

  static bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  static bool word_char(char c) { return letter(c) || digit(c) || c == '_'; }

  std::string_view word() {
    const size_t from = at_;
    while (at_ < s_.size() && word_char(s_[at_])) ++at_;
    return s_.substr(from, at_ - from);
  }
  // Digits, a fraction, an exponent; glued to a letter, '_' or '.' it is Python's
  // other numbers (1j is sympy's I, 0x10, 1_0) or no number.
  void number() {
    while (at_ < s_.size() && digit(s_[at_])) ++at_;
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      while (at_ < s_.size() && digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (at_ >= s_.size() || !digit(s_[at_])) fail("a number with an exponent and no digits");
      while (at_ < s_.size() && digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && (word_char(s_[at_]) || s_[at_] == '.')) fail("a number Python reads otherwise");
  }
  // A quoted string of `allowed` characters only, no escapes.
  std::string_view string(bool (*allowed)(char)) {
    skip_spaces();
    if (at_ >= s_.size() || (s_[at_] != '\'' && s_[at_] != '"')) fail("expected a quoted name or number");
    const char quote = s_[at_++];
    const size_t from = at_;
    while (at_ < s_.size() && s_[at_] != quote) {
      if (!allowed(s_[at_])) fail("a string holding '" + std::string(1, s_[at_]) + "'");
      ++at_;
    }
    if (at_ >= s_.size() || at_ == from) fail("an empty or unterminated string");
    return s_.substr(from, (at_++) - from);
  }
  // keyword '=' True|False|integer, after a comma.
  void keyword(bool precision_only) {
    skip_spaces();
    const std::string_view key = word();
    if (key.empty() || !(key[0] >= 'a' && key[0] <= 'z') || (precision_only && key != "precision")) {
      fail("a keyword argument torch.export does not write");
    }
    expect("=");
    skip_spaces();
    const std::string_view value = word();
    const bool integer = !value.empty() && std::all_of(value.begin(), value.end(), digit);
    if (!(value == "True" || value == "False" || (integer && !precision_only) || (integer && key == "precision"))) {
      fail("a keyword value torch.export does not write");
    }
    if (precision_only && !integer) fail("a precision that is not a number");
  }

  // `depth` counts parentheses, calls and chained unary operators.
  void atom(int depth) {
    skip_spaces();
    if (at_ >= s_.size()) fail("the expression ends early");
    const char c = s_[at_];
    if (c == '(') {
      ++at_;
      expr(depth + 1);
      expect(")");
      return;
    }
    if (digit(c) || (c == '.' && at_ + 1 < s_.size() && digit(s_[at_ + 1]))) return number();
    if (!letter(c)) fail("'" + std::string(1, c) + "', which is no part of an expression torch.export writes");
    const size_t start = at_;
    const std::string_view name = word();
    skip_spaces();
    if (at_ < s_.size() && s_[at_] == '(') {
      ++at_;
      return call(name, start, depth);
    }
    if (!bare_name(name)) {
      at_ = start;
      fail("the name '" + std::string(name.substr(0, 60)) + "', which is neither a symbol nor a constant");
    }
  }

  void call(std::string_view name, size_t start, int depth) {
    if (name == "Symbol" || name == "Dummy") {
      string([](char c) { return word_char(c); });
      while (accept(",")) keyword(false);
    } else if (name == "Float") {
      skip_spaces();
      if (at_ < s_.size() && (s_[at_] == '\'' || s_[at_] == '"')) {
        string([](char c) { return digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' ||
                                   c == 'i' || c == 'n' || c == 'f' || c == 'a'; });
      } else {
        accept("-");
        skip_spaces();
        if (at_ >= s_.size() || !digit(s_[at_])) fail("a Float of something other than a number");
        number();
      }
      if (accept(",")) keyword(true);
    } else if (function(name)) {
      do expr(depth + 1);
      while (accept(","));
    } else {
      at_ = start;
      fail("calls '" + std::string(name.substr(0, 60)) + "', which is not a function torch.export writes");
    }
    expect(")");
  }

  // Symbols as torch names them (s0, u3, zuf0, ps1: letters, then digits),
  // and sympy's constants.
  static bool bare_name(std::string_view n) {
    static const std::set<std::string_view> kSympyConstants = {"oo",   "zoo",   "nan",  "int_oo", "true", "false",
                                                          "True", "False", "pi",   "E"};
    if (kSympyConstants.count(n) > 0) return true;
    size_t i = 0;
    while (i < n.size() && n[i] >= 'a' && n[i] <= 'z') ++i;
    const size_t letters = i;
    while (i < n.size() && digit(n[i])) ++i;
    return letters > 0 && letters < n.size() && i == n.size();
  }
  // The sympy classes srepr writes for torch's expressions, and the
  // deserializer's locals (torch.utils._sympy.functions, 2.13).
  static bool function(std::string_view n) {
    static const std::set<std::string_view> kFunctions = {
        // sympy
        "Integer", "Rational", "Add", "Mul", "Pow", "Max", "Min", "Abs", "Mod", "floor", "ceiling", "Equality",
        "Unequality", "StrictLessThan", "LessThan", "StrictGreaterThan", "GreaterThan", "Eq", "Ne", "Lt", "Le", "Gt",
        "Ge", "And", "Or", "Not", "Xor", "Piecewise", "ExprCondPair",
        // torch.utils._sympy.functions, as the deserializer's locals name them
        "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv",
        "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv",
        "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal", "ToFloat",
        "Identity"};
    if (kFunctions.count(n) > 0) return true;
    // torch's functions named per operation (OpaqueUnaryFn_sqrt, BitwiseFn_bitwise_and): names no
    // namespace of sympify holds, which it makes undefined sympy Functions of.
    for (std::string_view prefix : {std::string_view("OpaqueUnaryFn_"), std::string_view("BitwiseFn_")}) {
      if (n.size() > prefix.size() && n.compare(0, prefix.size(), prefix) == 0 &&
          std::all_of(n.begin() + prefix.size(), n.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; })) {
        return true;
      }
    }
    return false;
  }

  std::string_view s_;
  size_t at_ = 0;
};

// Every "expr_str" member of a program's JSON, wherever it is: torch.export.load
// reads the program into its schema's dataclasses, and a SymExpr's expr_str is
// the one place a string reaches sympify (range_constraints' keys are only
// looked up). A value that is not a string is not what torch writes: sympify
// converts a list's items one by one, strings included.
void collect_sym_exprs(const json& v, std::string& where, uint64_t& count, std::vector<Pt2SymExprProblem>& out) {
  constexpr size_t kKept = 100;
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t mark = where.size();
      where += "[" + std::to_string(i) + "]";
      collect_sym_exprs(v[i], where, count, out);
      where.resize(mark);
    }
    return;
  }
  if (!v.is_object()) return;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const size_t mark = where.size();
    where += (where.empty() ? "" : ".") + it.key();
    if (it.key() == "expr_str") {
      ++count;
      std::string why = it->is_string() ? pt2_sym_expr_problem(it->get_ref<const std::string&>())
                                        : "not a string (" + std::string(it->type_name()) + ")";
      if (!why.empty() && out.size() < kKept) {
        std::string text = it->is_string() ? it->get<std::string>() : it->dump();
        if (text.size() > 200) text = text.substr(0, 200) + "...";
        out.push_back(Pt2SymExprProblem{where, std::move(text), std::move(why)});
      }
    } else {
      collect_sym_exprs(*it, where, count, out);
    }
    where.resize(mark);
  }
}

// SymInt: {"as_int": 4} or {"as_expr": {"expr_str": ..., "hint": {"as_int": 2}}}.
Pt2Dim read_dim(const Node& n) {
  const auto [kind, v] = n.only_member();
  Pt2Dim d;
  if (kind == "as_int") {
    d.value = v.integer();
  } else if (kind == "as_expr") {
    d.symbol = pt2_symbol_text(v.at("expr_str").str());
    if (v.has("hint")) {
      const auto [hk, hv] = v.at("hint").only_member();
      if (hk == "as_int") d.hint = hv.integer();
    }
  } else {
    n.fail("unknown SymInt kind '" + kind + "'");
  }
  return d;
}

Pt2Tensor read_tensor_meta(const Node& n) {
  Pt2Tensor t;
  uint64_t element_size = 0;
  const int64_t code = n.at("dtype").integer();
  if (!pt2_scalar_type(code, &t.dtype, &element_size)) t.dtype = "scalar_type_" + std::to_string(code);
  for (const Node& s : n.at("sizes").items()) t.sizes.push_back(read_dim(s));
  if (n.has("strides")) {
    for (const Node& s : n.at("strides").items()) t.strides.push_back(read_dim(s));
  }
  if (n.has("storage_offset")) t.storage_offset = read_dim(n.at("storage_offset")).value;
  if (n.has("requires_grad")) t.requires_grad = n.at("requires_grad").boolean();
  if (n.has("device")) {
    const Node dev = n.at("device");
    t.device = dev.at("type").str();
    if (dev.has("index")) t.device += ":" + std::to_string(dev.at("index").integer());
  }
  std::vector<int64_t> shape, stride;
  for (const Pt2Dim& d : t.sizes) {
    if (!d.value) return t;
    if (*d.value < 0) n.fail("a negative size (" + std::to_string(*d.value) + ")");
    shape.push_back(*d.value);
  }
  uint64_t numel = 1;
  for (int64_t s : shape) {
    if (mul_overflows(numel, static_cast<uint64_t>(s), &numel)) n.fail("sizes whose product overflows 64 bits");
  }
  t.numel = numel;
  if (element_size == 0) return t;
  // The bytes a storage needs: by the strides when they are all numbers,
  // else as if contiguous.
  uint64_t end = numel;
  bool strided = t.strides.size() == shape.size();
  for (const Pt2Dim& d : t.strides) strided = strided && d.value.has_value();
  if (strided) {
    for (const Pt2Dim& d : t.strides) stride.push_back(*d.value);
    uint64_t ignored = 0;
    if (!tensor_extent(shape, stride, t.storage_offset.value_or(0), &ignored, &end)) {
      n.fail("sizes, strides and offset that overflow 64 bits or are negative");
    }
  }
  uint64_t nbytes = 0;
  if (mul_overflows(end, element_size, &nbytes)) n.fail("a tensor whose size in bytes overflows 64 bits");
  t.nbytes = nbytes;
  return t;
}

// Argument or a signature's TensorArgument: the name and what the value is.
void read_argument(const Node& n, Pt2Arg& arg) {
  if (n.has("name") && n.value().size() == 1) {  // a bare TensorArgument / TokenArgument
    arg.name = n.at("name").str();
    return;
  }
  const auto [kind, v] = n.only_member();
  if (kind == "as_tensor") {
    arg.value_type = "tensor";
    arg.name = v.at("name").str();
  } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
    arg.value_type = kind.substr(3);
    const auto [sk, sv] = v.only_member();
    if (sk == "as_name") arg.name = sv.str();
    else arg.value_text = sv.value().dump();
  } else if (kind == "as_custom_obj") {
    arg.value_type = "custom_obj";
    arg.name = v.at("name").str();
    arg.value_text = v.at("class_fqn").str();
  } else if (kind == "as_none") {
    arg.value_type = "none";
  } else if (kind == "as_int" || kind == "as_float" || kind == "as_bool" || kind == "as_string") {
    arg.value_type = kind.substr(3);
    arg.value_text = v.value().dump();
  } else {
    arg.value_type = kind.substr(0, 3) == "as_" ? kind.substr(3) : kind;
  }
}

// InputSpec / OutputSpec union: {"user_input": {"arg": ...}}, {"parameter": {"arg": ..., "parameter_name": ...}}.
Pt2Arg read_spec(const Node& n) {
  const auto [kind, v] = n.only_member();
  Pt2Arg arg;
  arg.kind = kind;
  if (kind == "constant_input") {
    arg.name = v.at("name").str();
    const auto [ck, cv] = v.at("value").only_member();
    arg.value_type = ck.substr(0, 3) == "as_" ? ck.substr(3) : ck;
    arg.value_text = cv.value().dump();
    return arg;
  }
  const Node a = v.at("arg");
  read_argument(a, arg);
  if (arg.value_type.empty() && kind != "token") arg.value_type = "tensor";
  if (kind == "token") arg.value_type = "token";
  for (const char* key : {"parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "user_input_name"}) {
    if (v.has(key)) arg.target = v.at(key).str();
  }
  if (v.has("persistent")) arg.persistent = v.at("persistent").boolean();
  return arg;
}

void attach_values(const Node& graph, std::vector<Pt2Arg>& args) {
  if (!graph.has("tensor_values")) return;
  const Node values = graph.at("tensor_values");
  for (Pt2Arg& a : args) {
    if (a.value_type != "tensor" || a.name.empty()) continue;
    if (const auto meta = values.find(a.name)) a.tensor = read_tensor_meta(*meta);
  }
}

// A graph's call targets (Pt2Program::call_targets): its nodes' and, in
// their arguments, the nodes' of each graph argument ({"as_graph": {"graph":
// ...}}) and each operator ({"as_operator": "..."}), at any depth (the JSON's
// depth is bounded by parse_record).
void graph_call_targets(const Node& graph, std::set<std::string>& out);
void argument_call_targets(const Node& v, std::set<std::string>& out) {
  if (v.value().is_array()) {
    for (const Node& item : v.items()) argument_call_targets(item, out);
    return;
  }
  if (!v.value().is_object()) return;
  for (const auto& [key, member] : v.members()) {
    if (key == "as_operator") {
      out.insert(member.str());
    } else if (key == "as_graph") {
      graph_call_targets(member.at("graph"), out);
    } else {
      argument_call_targets(member, out);
    }
  }
}
void graph_call_targets(const Node& graph, std::set<std::string>& out) {
  for (const Node& n : graph.at("nodes").items()) {
    out.insert(n.at("target").str());
    if (n.has("inputs")) argument_call_targets(n.at("inputs"), out);
  }
}

void read_program(const TorchArchive& archive, const Record& r, Pt2Program& p) {
  const json doc = parse_record(archive, r, Pt2Limits::kProgramJson);
  const Node root(doc, r.name, archive.path());
  std::string where;
  collect_sym_exprs(doc, where, p.sym_exprs, p.unsafe_sym_exprs);
  if (const auto v = root.find("schema_version")) {
    if (v->has("major")) p.schema_major = v->at("major").integer();
    if (v->has("minor")) p.schema_minor = v->at("minor").integer();
  }
  if (root.has("torch_version")) p.torch_version = root.at("torch_version").str();
  if (root.has("opset_version")) {
    for (const auto& [name, v] : root.at("opset_version").members()) p.opsets[name] = v.integer();
  }
  if (root.has("verifiers")) {
    for (const Node& v : root.at("verifiers").items()) p.verifiers.push_back(v.str());
  }
  if (root.has("range_constraints")) {
    for (const auto& [symbol, v] : root.at("range_constraints").members()) {
      Pt2Range range{symbol, std::nullopt, std::nullopt};
      if (v.has("min_val")) range.min = v.at("min_val").integer();
      if (v.has("max_val")) range.max = v.at("max_val").integer();
      p.ranges.push_back(std::move(range));
    }
  }
  const Node gm = root.at("graph_module");
  const Node graph = gm.at("graph");
  const Node signature = gm.at("signature");
  for (const Node& s : signature.at("input_specs").items()) p.inputs.push_back(read_spec(s));
  for (const Node& s : signature.at("output_specs").items()) p.outputs.push_back(read_spec(s));
  attach_values(graph, p.inputs);
  attach_values(graph, p.outputs);
  const std::vector<Node> nodes = graph.at("nodes").items();
  p.nodes = nodes.size();
  for (const Node& n : nodes) p.operators[n.at("target").str()] += 1;
  graph_call_targets(graph, p.call_targets);
}

void read_payloads(const TorchArchive& archive, const Record& r, std::string_view folder, std::vector<Pt2Payload>& out,
                   std::vector<std::string>& problems) {
  const json doc = parse_record(archive, r, Pt2Limits::kConfigJson);
  const Node root(doc, r.name, archive.path());
  for (const auto& [name, v] : root.at("config").members()) {
    Pt2Payload p;
    p.name = name;
    const std::string path_name = v.at("path_name").str();
    if (path_name.empty() || path_name.find('/') != std::string::npos || path_name == "." || path_name == "..") {
      v.fail("path_name '" + path_name + "' is not a file name in " + std::string(folder));
    }
    p.record = std::string(folder) + path_name;
    if (v.has("is_param")) p.is_param = v.at("is_param").boolean();
    if (v.has("use_pickle")) p.use_pickle = v.at("use_pickle").boolean();
    if (v.has("tensor_meta")) p.tensor = read_tensor_meta(v.at("tensor_meta"));
    if (const Record* data = archive.find(p.record)) {
      const ZipEntry& e = *data->entry;
      p.present = true;
      p.stored_size = e.uncompressed_size;
      p.stored = e.stored();
      p.aligned = e.data_offset % 64 == 0;
      if (!p.use_pickle && p.tensor && p.tensor->nbytes && e.uncompressed_size < *p.tensor->nbytes) {
        problems.push_back("record '" + p.record + "' holds " + std::to_string(e.uncompressed_size) + " bytes but '" +
                           name + "' (" + p.tensor->dtype + ") needs " + std::to_string(*p.tensor->nbytes));
      }
    } else {
      problems.push_back("record '" + p.record + "' of '" + name + "' (" + r.name + ") is missing");
    }
    out.push_back(std::move(p));
  }
}

// Sample inputs are a torch.save file inside the archive: its pickle is read
// (bounded), never its tensor data.
void read_sample_inputs(const TorchArchive& archive, const Record& r, Pt2SampleInputs& s) {
  s.record = r.name;
  s.size = r.entry->uncompressed_size;
  if (s.size > Pt2Limits::kSampleInputs) {
    s.problem = "not read: larger than " + human_size(Pt2Limits::kSampleInputs);
    return;
  }
  try {
    const TorchArchive inner(make_memory_source(archive.read(r, Pt2Limits::kSampleInputs), r.name));
    const Record* data = inner.find("data.pkl");
    if (data == nullptr) {
      s.problem = "not a torch.save file (no data.pkl)";
      return;
    }
    ModelContents contents;
    collect_saved_object(parse_pickle(inner.read(*data, ReadLimits::kPickle), r.name + "/data.pkl"), "data", contents);
    for (TensorInfo& t : contents.tensors) s.tensors.push_back(std::move(t));
    for (const std::string& p : contents.problems) s.problem += (s.problem.empty() ? "" : "; ") + p;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    s.problem = e.what();
  }
}

void read_aoti(const TorchArchive& archive, Pt2Contents& out) {
  std::map<std::string, Pt2AotiModel> models;
  for (const Record& r : archive.records()) {
    if (r.name.compare(0, kAoti.size(), kAoti) != 0) continue;
    const std::string rest = r.name.substr(kAoti.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) {
      out.problems.push_back("record '" + r.name + "' is not inside a model folder of " + std::string(kAoti));
      continue;
    }
    const std::string model = rest.substr(0, slash);
    Pt2AotiModel& m = models[model];
    m.name = model;
    const std::string file = rest.substr(slash + 1);
    m.files.push_back(Pt2AotiFile{file, r.entry->uncompressed_size});
    m.bytes += r.entry->uncompressed_size;
    if (!ends_with(file, "_metadata.json") || file.find('/') != std::string::npos) continue;
    const json doc = parse_record(archive, r, Pt2Limits::kMetadataJson);
    const Node root(doc, r.name, archive.path());
    for (const auto& [key, v] : root.members()) {
      std::string value = v.value().is_string() ? v.str() : v.value().dump();
      const auto [it, fresh] = m.metadata.emplace(key, value);
      if (!fresh && it->second != value) {
        out.problems.push_back("AOTInductor model '" + model + "': " + key + " is '" + it->second + "' in one metadata "
                               "record and '" + value + "' in " + r.name);
      }
    }
  }
  for (auto& [name, m] : models) {
    if (const auto it = m.metadata.find("AOTI_DEVICE_KEY"); it != m.metadata.end()) m.device = it->second;
    out.aoti.push_back(std::move(m));
  }
}

// "<model>" of prefix + "<model>" + suffix, or nothing.
std::optional<std::string> model_of(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      !ends_with(name, suffix)) {
    return std::nullopt;
  }
  std::string model = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (model.find('/') != std::string::npos) return std::nullopt;
  return model;
}

std::string tensor_type(const Pt2Tensor& t) {
  std::string dims;
  for (const Pt2Dim& d : t.sizes) dims += (dims.empty() ? "" : ", ") + d.text();
  return t.dtype + "[" + dims + "]";
}

std::string literal(const json& v) {
  std::string text = v.dump();
  if (text.size() > Pt2GraphLimits::kLiteral) text = text.substr(0, Pt2GraphLimits::kLiteral) + "...";
  return text;
}

// An Argument (torch/_export/serde/schema.py) as text; the values it reads go to `reads`.
std::string render_argument(const Node& n, std::vector<std::string>& reads) {
  const auto value_name = [&](const Node& v) {
    const std::string name = v.at("name").str();
    reads.push_back(name);
    return "%" + name;
  };
  const auto list = [&](const Node& v, const std::function<std::string(const Node&)>& item) {
    std::string out;
    for (const Node& i : v.items()) out += (out.empty() ? "" : ", ") + item(i);
    return "[" + out + "]";
  };
  const auto sym = [&](const Node& v) {
    const auto [k, x] = v.only_member();
    if (k == "as_name") {
      reads.push_back(x.str());
      return "%" + x.str();
    }
    return literal(x.value());
  };
  const auto [kind, v] = n.only_member();
  if (kind == "as_tensor" || kind == "as_custom_obj") return value_name(v);
  if (kind == "as_tensors") return list(v, value_name);
  if (kind == "as_optional_tensor") return render_argument(v, reads);
  if (kind == "as_optional_tensors") return list(v, [&](const Node& i) { return render_argument(i, reads); });
  if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") return sym(v);
  if (kind == "as_sym_ints" || kind == "as_sym_floats" || kind == "as_sym_bools") return list(v, sym);
  if (kind == "as_none") return "None";
  if (kind == "as_scalar_type") {
    std::string dtype;
    uint64_t size = 0;
    return pt2_scalar_type(v.integer(), &dtype, &size) ? dtype : "scalar_type(" + literal(v.value()) + ")";
  }
  if (kind == "as_device") {
    std::string device = v.at("type").str();
    if (v.has("index")) device += ":" + std::to_string(v.at("index").integer());
    return "device(" + device + ")";
  }
  if (kind == "as_graph") return "graph(" + v.at("name").str() + ")";
  if (kind == "as_int" || kind == "as_float" || kind == "as_bool" || kind == "as_string" || kind == "as_ints" ||
      kind == "as_floats" || kind == "as_bools" || kind == "as_strings") {
    return literal(v.value());
  }
  const std::string short_kind = kind.compare(0, 3, "as_") == 0 ? kind.substr(3) : kind;
  return short_kind + "(" + literal(v.value()) + ")";
}

// A node's outputs: Argument values ({"as_tensor": ...}, {"as_tensors": [...]}, ...), by name.
void output_names(const Node& n, std::vector<std::string>& names) {
  std::vector<std::string> reads;
  render_argument(n, reads);
  for (std::string& r : reads) names.push_back(std::move(r));
}

// torch.export.load takes every record under models/ as a program
// (_load_exported_programs: file.startswith("models/"), its name cut out by
// position, never checked), where we read only models/<name>.json: a program
// kept as models/sub/x.json or models/x would run in PyTorch unseen by
// inspect and verify. So any other record there is refused, by name.
void refuse_hidden_programs(const TorchArchive& archive) {
  for (const Record& r : archive.records()) {
    if (starts_with(r.name, kModels) && !model_of(r.name, kModels, ".json")) {
      throw_bad_input("record '" + r.name.substr(0, 200) +
                          "' is under models/ but not a models/<name>.json: torch.export.load would load it as a "
                          "program that tsarchive cannot read",
                      archive.path(), "the archive was altered; torch.export.save keeps each program as models/<name>.json");
    }
  }
}

const Record& find_program(const TorchArchive& archive, const std::string& program) {
  refuse_hidden_programs(archive);
  std::vector<std::string> names;
  for (const Record& r : archive.records()) {
    if (const auto model = model_of(r.name, kModels, ".json")) names.push_back(*model);
  }
  std::string wanted = program;
  if (wanted.empty()) wanted = names.size() == 1 ? names.front() : "model";
  if (const Record* r = archive.find(std::string(kModels) + wanted + ".json"); r != nullptr && !names.empty()) {
    if (std::find(names.begin(), names.end(), wanted) != names.end()) return *r;
  }
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw_bad_input("no program '" + wanted + "' (models/" + wanted + ".json)", archive.path(),
                  list.empty() ? "the archive holds no program (an AOTInductor package keeps only compiled code)"
                               : "its programs: " + list + " (choose one with --method)");
}

}  // namespace

std::optional<std::string> pt2_program_of(const std::string& record) { return model_of(record, kModels, ".json"); }

Pt2Graph read_pt2_graph(const TorchArchive& archive, const std::string& program) {
  const Record& r = find_program(archive, program);
  const json doc = parse_record(archive, r, Pt2Limits::kProgramJson);
  const Node root(doc, r.name, archive.path());
  Pt2Graph g;
  g.program = *model_of(r.name, kModels, ".json");
  g.record = r.name;
  const Node gm = root.at("graph_module");
  const Node graph = gm.at("graph");
  if (graph.has("tensor_values")) {
    for (const auto& [name, meta] : graph.at("tensor_values").members()) g.types[name] = tensor_type(read_tensor_meta(meta));
  }
  for (const char* kind : {"sym_int_values", "sym_float_values", "sym_bool_values"}) {
    if (!graph.has(kind)) continue;
    const std::string type = std::string(kind).substr(0, std::string(kind).size() - 7);
    for (const auto& [name, _] : graph.at(kind).members()) g.types.emplace(name, type);
  }
  for (const Node& s : gm.at("signature").at("input_specs").items()) {
    const Pt2Arg arg = read_spec(s);
    if (!arg.name.empty()) g.roles[arg.name] = arg.kind + (arg.target.empty() ? "" : " " + arg.target);
  }
  for (const Node& i : graph.at("inputs").items()) output_names(i, g.inputs);
  for (const Node& o : graph.at("outputs").items()) output_names(o, g.outputs);
  for (const Node& n : graph.at("nodes").items()) {
    Pt2GraphNode node;
    node.target = n.at("target").str();
    node.torch_op = node.target.compare(0, 10, "torch.ops.") == 0;
    if (node.torch_op) node.target = node.target.substr(10);
    for (const Node& in : n.at("inputs").items()) {
      std::string text = render_argument(in.at("arg"), node.inputs);
      const bool keyword = in.has("kind") && in.at("kind").integer() == 2;
      node.args.push_back(keyword && in.has("name") ? in.at("name").str() + "=" + text : text);
    }
    for (const Node& out : n.at("outputs").items()) output_names(out, node.outputs);
    g.nodes.push_back(std::move(node));
  }
  return g;
}

ModelContents pt2_tensors(const Pt2Contents& contents) {
  ModelContents out;
  const bool several = contents.programs.size() > 1;
  for (const Pt2Program& program : contents.programs) {
    const auto add = [&](const Pt2Payload& p, TensorRole role) {
      const std::string path = several ? program.name + "/" + p.name : p.name;
      if (!p.tensor || p.use_pickle || !p.tensor->numel) {
        out.problems.push_back("'" + path + "' (" + p.record + ") is " +
                               (p.use_pickle ? "pickled" : p.tensor ? "of a symbolic shape" : "without tensor_meta") +
                               ": compared as a record only");
        return;
      }
      const Pt2Tensor& t = *p.tensor;
      TensorInfo info;
      info.path = path;
      info.role = role;
      info.dtype = t.dtype;
      for (const Pt2Dim& d : t.sizes) info.shape.push_back(*d.value);
      bool strided = t.strides.size() == t.sizes.size();
      for (const Pt2Dim& d : t.strides) strided = strided && d.value.has_value();
      if (strided) {
        for (const Pt2Dim& d : t.strides) info.stride.push_back(*d.value);
      } else {  // contiguous, as torch.export writes its weights
        info.stride.assign(info.shape.size(), 1);
        for (size_t i = info.shape.size(); i > 1; --i) info.stride[i - 2] = info.stride[i - 1] * info.shape[i - 1];
      }
      info.storage_offset = t.storage_offset.value_or(0);
      info.device = t.device;
      info.storage_record = p.record;
      info.numel = *t.numel;
      uint64_t element_size = 0;
      if (dtype_element_size(t.dtype, &element_size)) info.nbytes = info.numel * element_size;
      info.requires_grad = t.requires_grad;
      out.storages[p.record] = StorageInfo{p.record, t.dtype, info.numel, t.nbytes.value_or(info.nbytes), t.device};
      out.tensors.push_back(std::move(info));
    };
    for (const Pt2Payload& p : program.weights) add(p, p.is_param ? TensorRole::Parameter : TensorRole::Buffer);
    for (const Pt2Payload& p : program.constants) add(p, TensorRole::Constant);
  }
  return out;
}

bool pt2_scalar_type(int64_t code, std::string* dtype, uint64_t* element_size) {
  struct Entry {
    int64_t code;
    const char* name;
    uint64_t size;
  };
  static constexpr Entry kTypes[] = {
      {1, "uint8", 1},           {2, "int8", 1},           {3, "int16", 2},          {4, "int32", 4},
      {5, "int64", 8},           {6, "float16", 2},        {7, "float32", 4},        {8, "float64", 8},
      {9, "complex32", 4},       {10, "complex64", 8},     {11, "complex128", 16},   {12, "bool", 1},
      {13, "bfloat16", 2},       {28, "uint16", 2},        {29, "float8_e4m3fn", 1}, {30, "float8_e5m2", 1},
      {31, "float8_e4m3fnuz", 1}, {32, "float8_e5m2fnuz", 1}, {33, "float8_e8m0fnu", 1}, {34, "uint32", 4},
      {35, "uint64", 8},
  };
  for (const Entry& e : kTypes) {
    if (e.code != code) continue;
    *dtype = e.name;
    *element_size = e.size;
    return true;
  }
  return false;
}

std::string pt2_sym_expr_problem(std::string_view expr) { return SymExprGrammar(expr).problem(); }

std::vector<Pt2SymExprProblem> pt2_unsafe_sym_exprs(const std::string& program_json, uint64_t compressed_size,
                                                    const std::string& record, const std::string& path,
                                                    uint64_t* sym_exprs) {
  const json doc = parse_json_text(program_json, compressed_size, Pt2Limits::kProgramJson, record, path);
  std::vector<Pt2SymExprProblem> out;
  std::string where;
  uint64_t count = 0;
  collect_sym_exprs(doc, where, count, out);
  if (sym_exprs != nullptr) *sym_exprs = count;
  return out;
}

std::string pt2_symbol_text(const std::string& expr) {
  static constexpr std::string_view kSymbol = "Symbol('";
  std::string out;
  size_t i = 0;
  while (i < expr.size()) {
    const size_t at = expr.find(kSymbol, i);
    if (at == std::string::npos) break;
    const size_t name_end = expr.find('\'', at + kSymbol.size());
    const size_t close = name_end == std::string::npos ? std::string::npos : expr.find(')', name_end);
    if (close == std::string::npos) break;
    out += expr.substr(i, at - i) + expr.substr(at + kSymbol.size(), name_end - at - kSymbol.size());
    i = close + 1;
  }
  return out + expr.substr(i);
}

Pt2Contents read_pt2(const TorchArchive& archive) {
  refuse_hidden_programs(archive);
  Pt2Contents out;
  if (auto v = archive.read_optional("archive_format", ReadLimits::kSmall)) out.archive_format = trim(*v);
  if (auto v = archive.read_optional("archive_version", ReadLimits::kSmall)) out.archive_version = trim(*v);
  if (!out.archive_format.empty() && out.archive_format != "pt2") {
    out.problems.push_back("archive_format holds '" + out.archive_format + "', expected pt2");
  }
  if (archive.find("serialized_exported_program.json") != nullptr) {
    out.notes.push_back("the torch.export layout of PyTorch before 2.6 (serialized_exported_program.json): "
                        "its program is not read");
  }
  for (const Record& r : archive.records()) {
    if (const auto model = model_of(r.name, kModels, ".json")) {
      Pt2Program p;
      p.name = *model;
      p.record = r.name;
      read_program(archive, r, p);
      const std::string weights = std::string(kWeights) + *model + "_weights_config.json";
      const std::string constants = std::string(kConstants) + *model + "_constants_config.json";
      if (const Record* w = archive.find(weights)) {
        p.weights_config = weights;
        read_payloads(archive, *w, kWeights, p.weights, out.problems);
      }
      if (const Record* c = archive.find(constants)) {
        p.constants_config = constants;
        read_payloads(archive, *c, kConstants, p.constants, out.problems);
      }
      out.programs.push_back(std::move(p));
    } else if (const auto sample = model_of(r.name, kSampleInputs, ".pt")) {
      Pt2SampleInputs s;
      s.model = *sample;
      read_sample_inputs(archive, r, s);
      out.sample_inputs.push_back(std::move(s));
    }
  }
  read_aoti(archive, out);
  if (out.programs.empty() && out.aoti.empty() && archive.find("serialized_exported_program.json") == nullptr) {
    out.problems.push_back("no program (models/<model>.json) and no AOTInductor model (data/aotinductor/<model>/)");
  }
  return out;
}

}  // namespace tsarchive
