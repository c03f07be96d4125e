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
#include "base/utf8.h"
#include "format/pickle.h"

namespace tsarchive {
namespace {

using json = nlohmann::json;

constexpr std::string_view kModels = "models/";
constexpr std::string_view kWeights = "data/weights/";
constexpr std::string_view kConstants = "data/constants/";
constexpr std::string_view kSampleInputs = "data/sample_inputs/";
constexpr std::string_view kAoti = "data/aotinductor/";

// The length of the non-ASCII character at s[i] when it can stand inside a
// quoted Python string literal as itself (0 otherwise): valid UTF-8 (so no
// byte of it is a quote, a backslash or a line end), not a C1 control, not a
// Unicode line or paragraph separator, not a byte order mark. torch.export
// keeps a module's attribute and input names as Python spells them, and
// Python identifiers may be any letters ('self.线性', forward(self, café)).
size_t literal_safe_non_ascii_at(std::string_view s, size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return 0;
  uint32_t cp = 0;
  const size_t n = utf8_sequence_at(s, i, cp);
  if (n == 0 || cp < 0xA0 || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return 0;
  return n;
}

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
  // torch.export.load reads it with Python's json.loads: what that accepts
  // (NaN, Infinity, lone surrogates, long integers) is read here too and
  // judged, never refused as damaged. Python's own recursion limit (1000)
  // bounds its depth.
  auto doc = parse_bounded_json(python_json_as_strict(text), &problem, Pt2Limits::kJsonDepth, limit, values);
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

// What the grammars below share: a cursor over the text, its operators,
// numbers and nesting. A failure is thrown as the reason and caught by
// problem(). Numbers are bounded so that evaluating what passes stays cheap:
// an integer literal has at most kDigits digits, and a power's exponent is a
// literal of at most kMaxExponent (or a symbol or input size, which sympify
// keeps symbolic and a guard takes from the input), multiplied along nested
// powers: Integer(2)**Integer(10)**Integer(10) or Pow(7, 10**9), which
// sympify (or the guard) would compute exactly, are refused.
class ExprScanner {
 public:
  explicit ExprScanner(std::string_view text) : s_(text) {}
  virtual ~ExprScanner() = default;

  static constexpr size_t kDigits = 40;       // torch writes int64 bounds (19 digits) at most
  static constexpr int64_t kMaxExponent = 64;  // torch writes x**2, x**3, x**-1

 protected:
  [[noreturn]] void fail(const std::string& why) const { throw why + " (at byte " + std::to_string(at_) + ")"; }
  // Runs `parse` over the whole text: "" or why it is outside the grammar.
  template <typename Parse>
  std::string run(Parse parse) {
    if (s_.size() > Pt2Limits::kSymExpr) return "longer than " + std::to_string(Pt2Limits::kSymExpr) + " bytes";
    if (s_.empty()) return "empty";
    try {
      parse();
      skip_spaces();
      if (at_ < s_.size()) fail("'" + std::string(1, s_[at_]) + "' where the expression should end");
    } catch (const std::string& why) {
      return why;
    }
    return {};
  }
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
  // A keyword operator ("and", "not"), as a whole word.
  bool accept_word(std::string_view w) {
    skip_spaces();
    if (s_.compare(at_, w.size(), w) != 0) return false;
    const size_t next = at_ + w.size();
    if (next < s_.size() && word_char(s_[next])) return false;
    at_ = next;
    return true;
  }
  void deeper(int depth) const {
    if (depth > Pt2Limits::kSymExprDepth) fail("nested deeper than " + std::to_string(Pt2Limits::kSymExprDepth));
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
  // other numbers (1j is sympy's I, 0x10, 1_0) or no number. An integer
  // longer than kDigits is refused.
  void number() {
    const size_t from = at_;
    while (at_ < s_.size() && digit(s_[at_])) ++at_;
    bool integer = true;
    if (at_ < s_.size() && s_[at_] == '.') {
      integer = false;
      ++at_;
      while (at_ < s_.size() && digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      integer = false;
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (at_ >= s_.size() || !digit(s_[at_])) fail("a number with an exponent and no digits");
      while (at_ < s_.size() && digit(s_[at_])) ++at_;
    }
    if (at_ < s_.size() && (word_char(s_[at_]) || s_[at_] == '.')) fail("a number Python reads otherwise");
    if (integer && at_ - from > kDigits) {
      fail("an integer of " + std::to_string(at_ - from) + " digits (torch writes at most " + std::to_string(kDigits) +
           "), which is no size");
    }
  }
  // A literal integer exponent: ['-'] digits, at most kMaxExponent; its size.
  int64_t small_integer() {
    skip_spaces();
    const bool negative = at_ < s_.size() && s_[at_] == '-';
    if (negative) ++at_;
    skip_spaces();
    const size_t from = at_;
    while (at_ < s_.size() && digit(s_[at_])) ++at_;
    if (at_ == from || (at_ < s_.size() && (word_char(s_[at_]) || s_[at_] == '.'))) {
      at_ = from;
      fail("a power whose exponent is not a literal integer or a symbol");
    }
    if (at_ - from > 3 || std::stoll(std::string(s_.substr(from, at_ - from))) > kMaxExponent) {
      fail("a power whose exponent is above " + std::to_string(kMaxExponent) +
           ": evaluated exactly, it takes any time and memory");
    }
    const int64_t e = std::stoll(std::string(s_.substr(from, at_ - from)));
    return std::max<int64_t>(e, 1);
  }
  // Around a power: `base` parses the base, `exponent` the exponent and gives
  // its size (1 for a symbol). Nested powers multiply their exponents.
  template <typename Base, typename Exponent>
  void power(Base base, Exponent exponent) {
    const int64_t outer = power_;
    power_ = 1;
    base();
    const int64_t inner = power_;
    const int64_t e = exponent();
    if (inner * e > kMaxExponent || accept("**")) {
      fail("powers of powers whose exponents multiply past " + std::to_string(kMaxExponent) +
           ": evaluated exactly, they take any time and memory");
    }
    power_ = std::max(outer, inner * e);
  }

  // The arithmetic both grammars share, in Python's precedence:
  //   sum   := term (('+' | '-') term)*
  //   term  := unary (('*' | '/' | '//' | '%') unary)*
  //   unary := ('-' | '+') unary | atom ('**' exponent)?
  // with each grammar's atom and exponent.
  bool accept_comparison() {
    return accept("<=") || accept(">=") || accept("==") || accept("!=") || accept("<") || accept(">");
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
    bool raised = false;
    power([&] { atom(depth); raised = accept("**"); }, [&]() -> int64_t { return raised ? exponent() : 1; });
  }
  virtual void atom(int depth) = 0;
  // After '**': what the power is raised to, and the exponent's size (1 for a symbol).
  virtual int64_t exponent() = 0;

  std::string_view s_;
  size_t at_ = 0;
  int64_t power_ = 1;  // the largest product of exponents seen in the current base
};

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
//   unary := ('-' | '+') unary | power;  power := atom ('**' exponent)?
//   atom  := number | symbol | constant | '(' expr ')' | call
//   call  := Symbol|Dummy '(' 'name' (',' keyword '=' literal)* ')'
//          | Float '(' 'number' | number (',' precision '=' integer)? ')'
//          | Pow|PowByNatural|FloatPow|LShift|RShift '(' expr ',' exponent ')'
//          | function '(' expr (',' expr)* ')'
//   exponent := ['-'] integer | Integer '(' ['-'] integer ')' | Rational '(' integer ',' integer ')'
//             | Float '(' .. ')' | symbol | Symbol '(' .. ')'
// A function is a sympy class srepr writes or a torch function the
// deserializer's locals name (below); a bare name a symbol (letters, then
// digits: s0, u12, zuf0) or a constant (oo, zoo, nan, int_oo, true, false,
// True, False, pi, E). Strings appear only as a symbol's name or a float's
// digits: other sympy functions sympify their string arguments, which is eval
// again. No attribute, subscript, lambda, keyword argument elsewhere or
// Python keyword passes. Numbers are bounded (ExprScanner), and so is a
// Float's precision: torch writes 53 (a double), where a larger one makes
// sympify compute that many digits.
class SymExprGrammar : ExprScanner {
 public:
  explicit SymExprGrammar(std::string_view text) : ExprScanner(text) {}

  static constexpr int64_t kPrecision = 53;

  std::string problem() {
    return run([this] { expr(0); });
  }

 private:
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
    while (accept_comparison());
  }
  // What a power may be raised to: a small literal, or a symbol (sympify keeps it symbolic).
  int64_t exponent() override {
    skip_spaces();
    const size_t start = at_;
    if (at_ < s_.size() && (digit(s_[at_]) || s_[at_] == '-')) return small_integer();
    const std::string_view name = word();
    skip_spaces();
    if (at_ < s_.size() && s_[at_] == '(') {
      ++at_;
      int64_t e = 1;
      if (name == "Integer") {
        e = small_integer();
      } else if (name == "Rational") {
        e = small_integer();
        expect(",");
        small_integer();
      } else if (name == "Symbol" || name == "Dummy" || name == "Float") {
        call(name, start, 0);
        return 1;
      } else {
        at_ = start;
        fail("a power whose exponent is not a literal integer or a symbol");
      }
      expect(")");
      return e;
    }
    if (name.empty() || !bare_name(name) || constant(name)) {
      at_ = start;
      fail("a power whose exponent is not a literal integer or a symbol");
    }
    return 1;
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
    if (integer && (value.size() > 3 || std::stoll(std::string(value)) > kPrecision)) {
      fail("a precision of " + std::string(value.substr(0, 20)) + " bits (torch writes " + std::to_string(kPrecision) +
           "): sympify computes that many digits");
    }
  }

  // `depth` counts parentheses, calls and chained unary operators.
  void atom(int depth) override {
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
    deeper(depth);
    if (name == "Symbol" || name == "Dummy") {
      string([](char c) { return word_char(c); });
      while (accept(",")) keyword(false);
    } else if (name == "Float") {
      skip_spaces();
      if (at_ < s_.size() && (s_[at_] == '\'' || s_[at_] == '"')) {
        const std::string_view digits =
            string([](char c) { return digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' ||
                                       c == 'i' || c == 'n' || c == 'f' || c == 'a'; });
        if (digits.size() > 2 * kDigits) fail("a Float of " + std::to_string(digits.size()) + " characters");
      } else {
        accept("-");
        skip_spaces();
        if (at_ >= s_.size() || !digit(s_[at_])) fail("a Float of something other than a number");
        number();
      }
      if (accept(",")) keyword(true);
    } else if (raises(name)) {
      power([&] { expr(depth + 1); expect(","); }, [&] { return exponent(); });
    } else if (function(name)) {
      do expr(depth + 1);
      while (accept(","));
    } else {
      at_ = start;
      fail("calls '" + std::string(name.substr(0, 60)) + "', which is not a function torch.export writes");
    }
    expect(")");
  }

  static bool constant(std::string_view n) {
    static const std::set<std::string_view> kSympyConstants = {"oo",   "zoo",   "nan",  "int_oo", "true", "false",
                                                              "True", "False", "pi",   "E"};
    return kSympyConstants.count(n) > 0;
  }
  // Symbols as torch names them (s0, u3, zuf0, ps1: letters, then digits),
  // and sympy's constants.
  static bool bare_name(std::string_view n) {
    if (constant(n)) return true;
    size_t i = 0;
    while (i < n.size() && n[i] >= 'a' && n[i] <= 'z') ++i;
    const size_t letters = i;
    while (i < n.size() && digit(n[i])) ++i;
    return letters > 0 && letters < n.size() && i == n.size();
  }
  // The functions whose second argument is an exponent (a shift is a power of 2).
  static bool raises(std::string_view n) {
    return n == "Pow" || n == "PowByNatural" || n == "FloatPow" || n == "LShift" || n == "RShift";
  }
  // The sympy classes srepr writes for torch's expressions, and the
  // deserializer's locals (torch.utils._sympy.functions, 2.13).
  static bool function(std::string_view n) {
    static const std::set<std::string_view> kFunctions = {
        // sympy
        "Integer", "Rational", "Add", "Mul", "Max", "Min", "Abs", "Mod", "floor", "ceiling", "Equality",
        "Unequality", "StrictLessThan", "LessThan", "StrictGreaterThan", "GreaterThan", "Eq", "Ne", "Lt", "Le", "Gt",
        "Ge", "And", "Or", "Not", "Xor", "Piecewise", "ExprCondPair",
        // torch.utils._sympy.functions, as the deserializer's locals name them
        "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv",
        "FloatTrueDiv", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
        "RoundToInt", "RoundDecimal", "ToFloat", "Identity"};
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
};

// The guards torch.export writes as ExportedProgram.guards_code, which
// ep.module() of a loaded program exec()s as the body of a function
// (torch/export/_unlift.py _convert_guards_code_to_fn), after replacing each
// input's source ("L['x']") with args[i]. torch writes them with
// ShapeGuardPythonPrinter (torch/fx/experimental/symbolic_shapes.py,
// torch/utils/_sympy/printers.py PythonPrinter), 2.13:
//   1 + (L['x'].size()[0] // 2) <= L['x'].size()[0]
//   L['x'].size()[0] <= 10,  max(2, L['y']) == L['x'].stride()[0],  not (L['z'] == 0)
// The grammar, Python's precedence:
//   expr  := and ('or' and)*;  and := not ('and' not)*;  not := 'not' not | cmp
//   cmp   := bor (('<' | '<=' | '>' | '>=' | '==' | '!=') bor)*
//   bor   := bxor ('|' bxor)*;  bxor := band ('^' band)*;  band := sum ('&' sum)*
//   sum   := term (('+' | '-') term)*;  term := unary (('*' | '/' | '//' | '%') unary)*
//   unary := ('-' | '+') unary | power;  power := atom ('**' (['-'] integer | source))?
//   atom  := number | source | True | False | math.inf | math.nan | '(' expr ')'
//          | function '(' expr (',' expr)* ')'
//   source := L ('[' 'key' ']' | '[' integer ']' | '.' attribute)+
//             ('.size()' '[' integer ']' | '.stride()' '[' integer ']' | '.storage_offset()')?
// A function is one the printer writes (math.floor, math.ceil, math.trunc,
// abs, max, min, round, math.sin and the like, torch.sym_float,
// torch._sym_sqrt) or a name of the exec's namespace (SYMPY_INTERP).
// A key is letters, digits, '_', '-', '.' and spaces: no quote or backslash
// that would end the string or the error message the guard is quoted in; an
// attribute is a name that does not start with '_' (no __class__ and the like).
class GuardGrammar : ExprScanner {
 public:
  explicit GuardGrammar(std::string_view text) : ExprScanner(text) {}

  std::string problem() {
    return run([this] { expr(0); });
  }

 private:
  void expr(int depth) {
    deeper(depth);
    do conjunction(depth);
    while (accept_word("or"));
  }
  void conjunction(int depth) {
    do negation(depth);
    while (accept_word("and"));
  }
  void negation(int depth) {
    deeper(depth);
    if (accept_word("not")) return negation(depth + 1);
    do bitwise_or(depth);
    while (accept_comparison());
  }
  void bitwise_or(int depth) {
    do bitwise_xor(depth);
    while (accept("|"));
  }
  void bitwise_xor(int depth) {
    do bitwise_and(depth);
    while (accept("^"));
  }
  void bitwise_and(int depth) {
    do sum(depth);
    while (accept("&"));
  }
  // After '**': a small literal, or a size of an input.
  int64_t exponent() override {
    skip_spaces();
    if (at_ < s_.size() && s_[at_] == 'L') {
      source();
      return 1;
    }
    return small_integer();
  }

  void atom(int depth) override {
    skip_spaces();
    if (at_ >= s_.size()) fail("the guard ends early");
    const char c = s_[at_];
    if (c == '(') {
      ++at_;
      expr(depth + 1);
      expect(")");
      return;
    }
    if (digit(c) || (c == '.' && at_ + 1 < s_.size() && digit(s_[at_ + 1]))) return number();
    if (!letter(c)) fail("'" + std::string(1, c) + "', which is no part of a guard torch.export writes");
    const size_t start = at_;
    std::string name(word());
    if (name == "L") {
      at_ = start;
      return source();
    }
    while (at_ < s_.size() && s_[at_] == '.' && (name == "math" || name == "torch")) {
      ++at_;
      name += "." + std::string(word());
    }
    if (name == "True" || name == "False" || name == "math.inf" || name == "math.nan" || name == "inf") return;
    skip_spaces();
    if (at_ < s_.size() && s_[at_] == '(' && function(name)) {
      ++at_;
      do expr(depth + 1);
      while (accept(","));
      expect(")");
      return;
    }
    at_ = start;
    fail("'" + name.substr(0, 60) + "', which is no function or value of a guard torch.export writes");
  }

  // L['x'], L['x'][0]['k'], L['x'].size()[1], L['x'].storage_offset().
  void source() {
    expect("L");
    size_t steps = 0;
    for (;; ++steps) {
      if (s_.compare(at_, 2, "['") == 0) {
        at_ += 2;
        const size_t from = at_;
        while (at_ < s_.size()) {
          if (word_char(s_[at_]) || s_[at_] == '-' || s_[at_] == '.' || s_[at_] == ' ') {
            ++at_;
          } else if (const size_t n = literal_safe_non_ascii_at(s_, at_)) {
            at_ += n;
          } else {
            break;
          }
        }
        if (at_ == from || s_.compare(at_, 2, "']") != 0) fail("an input key other than letters, digits and '_'");
        at_ += 2;
      } else if (at_ < s_.size() && s_[at_] == '[') {
        ++at_;
        const size_t from = at_;
        while (at_ < s_.size() && digit(s_[at_])) ++at_;
        if (at_ == from || at_ - from > 9 || s_.compare(at_, 1, "]") != 0) fail("an input index that is not a number");
        ++at_;
      } else if (at_ < s_.size() && s_[at_] == '.' && steps > 0) {
        ++at_;
        const size_t from = at_;
        const std::string_view attribute = word();
        if (attribute.empty() || !letter(attribute[0])) {
          at_ = from;
          fail("an attribute of an input that is not a plain name");
        }
        if (attribute == "size" || attribute == "stride" || attribute == "storage_offset") {
          if (attribute == "storage_offset") return expect("()");
          expect("()");
          if (s_.compare(at_, 1, "[") != 0) fail("a size or stride without its index");
          ++at_;
          const size_t index = at_;
          while (at_ < s_.size() && digit(s_[at_])) ++at_;
          if (at_ == index || at_ - index > 3) fail("a dimension that is not a number");
          return expect("]");
        }
      } else {
        break;
      }
    }
    if (steps == 0) fail("'L' that is no input's source");
  }

  static bool function(const std::string& n) {
    static const std::set<std::string_view> kFunctions = {
        "math.floor", "math.ceil", "math.trunc", "abs", "max", "min", "round", "math.cos", "math.cosh",
        "math.acos", "math.sin", "math.sinh", "math.asin", "math.tan", "math.tanh", "math.atan", "math.log2",
        "math.sqrt", "math.exp", "math.log", "math.isnan", "torch.sym_float", "torch._sym_sqrt", "torch.sym_max",
        "torch.sym_min", "torch.sym_not", "torch.sym_ite", "torch.sym_int",
        "IsNonOverlappingAndDenseIndicator", "cast_symbool_to_symint_guardless"};
    return kFunctions.count(n) > 0;
  }
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

// ExportedProgram.guards_code (a list of strings, at the program's root):
// each entry outside GuardGrammar, which ep.module() would exec.
void collect_guards(const json& doc, uint64_t& count, std::vector<Pt2SymExprProblem>& out) {
  if (!doc.is_object()) return;
  const auto it = doc.find("guards_code");
  if (it == doc.end() || it->is_null()) return;
  const auto add = [&](std::string where, const json& v, std::string why) {
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (text.size() > 200) text = text.substr(0, 200) + "...";
    out.push_back(Pt2SymExprProblem{std::move(where), std::move(text), std::move(why)});
  };
  if (!it->is_array()) return add("guards_code", *it, "not a list (" + std::string(it->type_name()) + ")");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& g = (*it)[i];
    ++count;
    std::string why = g.is_string() ? pt2_guard_problem(g.get_ref<const std::string&>())
                                    : "not a string (" + std::string(g.type_name()) + ")";
    if (!why.empty() && out.size() < 100) add("guards_code[" + std::to_string(i) + "]", g, std::move(why));
  }
}

bool python_identifier(std::string_view n) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  return !n.empty() && letter(n[0]) &&
         std::all_of(n.begin(), n.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}
bool python_keyword(std::string_view n) {
  static const std::set<std::string_view> kKeywords = {
      "False", "None",   "True",    "and",      "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",      "elif", "else",   "except", "finally",  "for",
      "from",  "global", "if",      "import",   "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",   "raise",   "return",   "try",  "while",  "with",   "yield"};
  return kKeywords.count(n) > 0;
}

// The names of a program that FX writes into the Python source it generates
// and exec()s (GraphModule.recompile, during torch.export.load and again in
// ep.module()): the deserializer gives each graph value (input, node output,
// symbolic value) its JSON name unchanged (placeholder target, node.name),
// and FX's code generator writes them raw: `def forward(self, <input>)`,
// `<name> = torch.ops...(<arg>)`, `<keyword> = <arg>` for a higher-order
// operator's inputs. So each must be a Python identifier, not a keyword.
// Parameter, buffer and constant names (FQNs) become get_attr targets, which
// FX writes as `self.a.b` or `getattr(self, "<part>")`: each part must not
// hold a quote, a backslash or a control character (letters of any script
// are kept: they are Python's, see literal_safe_non_ascii_at). Node metadata is not
// written as code and is not read here.
void collect_names(const json& v, std::string& where, std::vector<Pt2SymExprProblem>& out) {
  const auto add = [&](const std::string& text, const char* why) {
    if (out.size() >= 100) return;
    out.push_back(Pt2SymExprProblem{where, text.size() > 200 ? text.substr(0, 200) + "..." : text, why});
  };
  const auto value_name = [&](const std::string& n) {
    if (!python_identifier(n)) add(n, "not a Python identifier");
    else if (python_keyword(n)) add(n, "a Python keyword");
  };
  const auto fqn = [&](const std::string& n) {
    size_t from = 0;
    for (;;) {
      const size_t dot = std::min(n.find('.', from), n.size());
      const std::string_view part = std::string_view(n).substr(from, dot - from);
      bool printable = true;
      for (size_t i = 0; i < part.size() && printable;) {
        const char c = part[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '\'') {
          ++i;
        } else if (const size_t len = literal_safe_non_ascii_at(part, i)) {
          i += len;
        } else {
          printable = false;
        }
      }
      if (part.empty() || !printable) return add(n, "not a dotted name FX can write as an attribute path");
      if (dot == n.size()) return;
      from = dot + 1;
    }
  };
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t mark = where.size();
      where += "[" + std::to_string(i) + "]";
      collect_names(v[i], where, out);
      where.resize(mark);
    }
    return;
  }
  if (!v.is_object()) return;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& key = it.key();
    if (key == "metadata") continue;
    const size_t mark = where.size();
    where += (where.empty() ? "" : ".") + key;
    if (it->is_string() && (key == "name" || key == "as_name" || key == "user_input_name")) {
      // A node input's name is its schema argument's (keywords included, as aten names them), or
      // "" for a higher-order operator's positional one (deserialize_hoo_inputs).
      const std::string& n = it->get_ref<const std::string&>();
      if (key == "name" && v.contains("arg")) {
        if (!n.empty() && !python_identifier(n)) add(n, "not a Python identifier");
      } else {
        value_name(n);
      }
    } else if (it->is_string() && (key == "parameter_name" || key == "buffer_name" || key == "tensor_constant_name" ||
                                   key == "custom_obj_name")) {
      fqn(it->get_ref<const std::string&>());
    } else if (it->is_object() && (key == "tensor_values" || key == "sym_int_values" || key == "sym_float_values" ||
                                   key == "sym_bool_values" || key == "custom_obj_values")) {
      for (auto m = it->begin(); m != it->end(); ++m) {
        const size_t inner = where.size();
        where += "." + m.key();
        value_name(m.key());
        where.resize(inner);
      }
    } else {
      collect_names(*it, where, out);
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
  collect_guards(doc, p.guards, p.unsafe_guards);
  if (doc.is_object() && doc.contains("graph_module")) {
    where = "graph_module";
    collect_names(doc["graph_module"], where, p.unsafe_names);
  }
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

std::string pt2_guard_problem(std::string_view guard) { return GuardGrammar(guard).problem(); }

std::vector<Pt2SymExprProblem> pt2_unsafe_sym_exprs(const std::string& program_json, uint64_t compressed_size,
                                                    const std::string& record, const std::string& path,
                                                    uint64_t* sym_exprs, std::vector<Pt2SymExprProblem>* guards,
                                                    std::vector<Pt2SymExprProblem>* names) {
  const json doc = parse_json_text(program_json, compressed_size, Pt2Limits::kProgramJson, record, path);
  std::vector<Pt2SymExprProblem> out;
  std::string where;
  uint64_t count = 0;
  collect_sym_exprs(doc, where, count, out);
  if (sym_exprs != nullptr) *sym_exprs = count;
  if (guards != nullptr) {
    uint64_t ignored = 0;
    collect_guards(doc, ignored, *guards);
  }
  if (names != nullptr && doc.is_object() && doc.contains("graph_module")) {
    where = "graph_module";
    collect_names(doc["graph_module"], where, *names);
  }
  return out;
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
