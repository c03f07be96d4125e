// A .pt2's symbolic sizes as people read them. torch.export 2.5 and later
// write each expr_str as sympy's srepr ("Add(FloorDiv(Symbol('s77',
// positive=True, integer=True), Integer(2)), Integer(1))"); Python shows the
// same expression with str() ("s77//2 + 1"). This prints srepr the way
// sympy's StrPrinter and torch's functions print (numbers last in a sum, a
// coefficient first in a product, x**-1 as a division, FloorDiv as a//b,
// relations as operators), without evaluating anything: the text is
// torch's canonical form already. Display only: the load-safety verdict
// judges expr_str by its own grammar (SymExprGrammar in pt2.cc).
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "format/pt2.h"

namespace tsarchive {
namespace {

// sympy's printing precedences (sympy/printing/precedence.py).
enum Precedence : int { kOr = 20, kAnd = 30, kRelational = 35, kAdd = 40, kMul = 50, kPow = 60, kNot = 100, kAtom = 1000 };

struct Term {
  std::string name;        // the call's ("Add", "Symbol", "Integer"), or "" for a literal
  std::string text;        // a Symbol's name, an Integer's or a literal's digits
  std::vector<Term> args;  // a call's positional arguments
};

struct Printed {
  std::string text;
  int precedence;
};

// The srepr text as a tree. Throws (a std::string, caught below) outside what srepr writes.
class SreprReader {
 public:
  explicit SreprReader(std::string_view s) : s_(s) {}

  Term whole() {
    Term t = term(0);
    if (at_ != s_.size()) throw std::string("trailing text");
    return t;
  }

 private:
  static constexpr int kDepth = 64;

  Term term(int depth) {
    if (depth > kDepth) throw std::string("too deep");
    Term t;
    if (at_ < s_.size() && (s_[at_] == '\'' || s_[at_] == '-' || (s_[at_] >= '0' && s_[at_] <= '9'))) {
      t.text = literal();
      return t;
    }
    t.name = word();
    if (t.name.empty()) throw std::string("no name");
    if (!take("(")) return t;  // true, false, oo, zoo, nan
    if (take(")")) return t;
    do {
      const size_t start = at_;
      const std::string key = word();
      if (!key.empty() && take("=")) {  // Symbol('x', integer=True), Float('1.5', precision=53)
        word();
        literal_if_any();
        continue;
      }
      at_ = start;
      t.args.push_back(term(depth + 1));
    } while (take(", "));
    if (!take(")")) throw std::string("no ')'");
    if (t.name == "Symbol" || t.name == "Integer" || t.name == "Float") {
      if (t.args.size() != 1 || !t.args[0].name.empty()) throw std::string("not one literal");
      t.text = t.args[0].text;
      t.args.clear();
    }
    return t;
  }
  std::string word() {
    const size_t from = at_;
    while (at_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '_')) ++at_;
    return std::string(s_.substr(from, at_ - from));
  }
  std::string literal() {
    if (take("'")) {
      const size_t end = s_.find('\'', at_);
      if (end == std::string_view::npos) throw std::string("no closing quote");
      std::string text(s_.substr(at_, end - at_));
      at_ = end + 1;
      return text;
    }
    const size_t from = at_;
    if (at_ < s_.size() && s_[at_] == '-') ++at_;
    while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
    if (at_ == from) throw std::string("no literal");
    return std::string(s_.substr(from, at_ - from));
  }
  void literal_if_any() {
    if (at_ < s_.size() && (s_[at_] == '\'' || s_[at_] == '-' || (s_[at_] >= '0' && s_[at_] <= '9'))) literal();
  }
  bool take(std::string_view token) {
    if (s_.compare(at_, token.size(), token) != 0) return false;
    at_ += token.size();
    return true;
  }

  std::string_view s_;
  size_t at_ = 0;
};

bool is_number(const Term& t) { return t.name == "Integer" || t.name == "Float" || t.name == "Rational"; }
bool is_minus_one(const Term& t) { return t.name == "Integer" && t.text == "-1"; }

std::string print_text(const Term& t);
Printed print(const Term& t);

std::string parenthesized(const Term& t, int level) {
  const Printed p = print(t);
  return p.precedence < level ? "(" + p.text + ")" : p.text;
}

std::string joined(const std::vector<Term>& args, const char* separator, int level) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) out += (i == 0 ? "" : separator) + parenthesized(args[i], level);
  return out;
}

bool is_positive_number(const Term& t) { return is_number(t) && !t.text.empty() && t.text[0] != '-' && t.text != "0"; }

// A number and the product of a negative number and one factor ("4 - 2*s0"):
// the one sum sympy prints with its number first (Expr.as_ordered_terms).
bool number_leads(const std::vector<Term>& args) {
  if (args.size() != 2) return false;
  const Term& number = is_number(args[0]) ? args[0] : args[1];
  const Term& product = is_number(args[0]) ? args[1] : args[0];
  return is_positive_number(number) && product.name == "Mul" && product.args.size() == 2 &&
         product.args[0].name == "Integer" && product.args[0].text[0] == '-';
}

Printed print_add(const std::vector<Term>& args) {
  std::vector<const Term*> order;
  const bool lead = number_leads(args);
  for (const Term& a : args) if (is_number(a) == lead) order.push_back(&a);
  for (const Term& a : args) if (is_number(a) != lead) order.push_back(&a);
  std::string out;
  for (const Term* a : order) {
    std::string text = parenthesized(*a, kAdd);
    if (out.empty()) {
      out = text;
    } else if (text[0] == '-') {
      out += " - " + text.substr(1);
    } else {
      out += " + " + text;
    }
  }
  return {out, kAdd};
}

Printed print_mul(const std::vector<Term>& args) {
  std::string sign, coefficient;
  std::vector<std::string> numerator, denominator;
  for (const Term& a : args) {
    if (a.name == "Integer" && &a == &args.front()) {
      if (a.text == "-1") sign = "-";
      else if (a.text[0] == '-') sign = "-", coefficient = a.text.substr(1);
      else coefficient = a.text;
    } else if (a.name == "Rational" && a.args.size() == 2 && &a == &args.front()) {
      std::string p = print_text(a.args[0]);
      if (p[0] == '-') sign = "-", p = p.substr(1);
      if (p != "1") coefficient = p;
      denominator.push_back(print_text(a.args[1]));
    } else if (a.name == "Pow" && a.args.size() == 2 && is_minus_one(a.args[1])) {
      denominator.push_back(parenthesized(a.args[0], kMul));
    } else {
      numerator.push_back(parenthesized(a, kMul));
    }
  }
  if (!coefficient.empty()) numerator.insert(numerator.begin(), coefficient);
  std::string top;
  for (size_t i = 0; i < numerator.size(); ++i) top += (i == 0 ? "" : "*") + numerator[i];
  if (top.empty()) top = "1";
  if (!denominator.empty()) {
    std::string bottom;
    for (size_t i = 0; i < denominator.size(); ++i) bottom += (i == 0 ? "" : "*") + denominator[i];
    top += "/" + (denominator.size() > 1 ? "(" + bottom + ")" : bottom);
  }
  return {sign + top, sign.empty() ? kMul : kAdd};
}

Printed print(const Term& t) {
  if (t.name.empty() || t.name == "Symbol" || t.name == "Float") return {t.text, kAtom};
  if (t.name == "Integer") return {t.text, t.text[0] == '-' ? kAdd : kAtom};
  if (t.args.empty()) {
    if (t.name == "true" || t.name == "false") return {t.name == "true" ? "True" : "False", kAtom};
    return {t.name, kAtom};
  }
  const auto two = [&](const char* op, int level) {  // a left-associative binary operator of precedence `level`
    return Printed{parenthesized(t.args[0], level) + op + parenthesized(t.args[1], level + 1), level};
  };
  const size_t n = t.args.size();
  if (t.name == "Add") return print_add(t.args);
  if (t.name == "Mul") return print_mul(t.args);
  if (t.name == "Rational" && n == 2) return {print_text(t.args[0]) + "/" + print_text(t.args[1]), kMul};
  if (t.name == "Pow" && n == 2) {
    if (is_minus_one(t.args[1])) return {"1/" + parenthesized(t.args[0], kPow + 1), kMul};
    return {parenthesized(t.args[0], kPow + 1) + "**" + parenthesized(t.args[1], kPow + 1), kPow};
  }
  if ((t.name == "FloorDiv" || t.name == "CleanDiv") && n == 2) {
    return {"(" + parenthesized(t.args[0], kAtom) + "//" + parenthesized(t.args[1], kAtom) + ")", kAtom};
  }
  if (n == 2) {
    static const std::pair<const char*, const char*> kRelations[] = {
        {"StrictLessThan", " < "}, {"LessThan", " <= "}, {"StrictGreaterThan", " > "}, {"GreaterThan", " >= "}};
    for (const auto& [name, op] : kRelations) {
      if (t.name == name) return two(op, kRelational);
    }
    if (t.name == "Equality") return {"Eq(" + joined(t.args, ", ", 0) + ")", kAtom};
    if (t.name == "Unequality") return {"Ne(" + joined(t.args, ", ", 0) + ")", kAtom};
  }
  if (t.name == "And") return {joined(t.args, " & ", kAtom), kAnd};
  if (t.name == "Or") return {joined(t.args, " | ", kAtom), kOr};
  if (t.name == "Not" && n == 1) return {"~" + parenthesized(t.args[0], kAtom), kNot};
  return {t.name + "(" + joined(t.args, ", ", 0) + ")", kAtom};  // Max, Min, Mod, torch's own functions
}

std::string print_text(const Term& t) { return print(t).text; }

// Text in which every Symbol('name', ...) is its name (str() form, or what the reader does not take).
std::string symbols_by_name(const std::string& expr) {
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

}  // namespace

std::string pt2_symbol_text(const std::string& expr) {
  if (expr.size() <= Pt2Limits::kSymExpr) {
    try {
      return print_text(SreprReader(expr).whole());
    } catch (const std::string&) {
      // str() form (torch.export before 2.5), or nothing srepr writes: names only.
    }
  }
  return symbols_by_name(expr);
}

}  // namespace tsarchive
