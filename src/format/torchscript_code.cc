#include "format/torchscript_code.h"

#include <algorithm>
#include <cctype>

namespace tsarchive {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

size_t indent_of(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  return i;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    if (nl == text.size()) break;
    start = nl + 1;
  }
  return lines;
}

// Splits at commas outside brackets and quotes.
std::vector<std::string_view> split_top_level(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
    else if (c == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view last = trim(s.substr(start));
  if (!last.empty()) parts.push_back(last);
  return parts;
}

// ["weight", "bias", ] -> {weight, bias}
std::vector<std::string> parse_name_list(std::string_view s) {
  std::vector<std::string> names;
  s = trim(s);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return names;
  for (std::string_view item : split_top_level(s.substr(1, s.size() - 2))) {
    if (item.size() >= 2 && (item.front() == '"' || item.front() == '\'')) {
      names.emplace_back(item.substr(1, item.size() - 2));
    }
  }
  return names;
}

// Parses "name(params) -> ret" (without "def " and the trailing ':').
bool parse_signature(std::string_view s, CodeMethod& m) {
  const size_t open = s.find('(');
  if (open == std::string_view::npos) return false;
  m.name = std::string(trim(s.substr(0, open)));
  int depth = 0;
  size_t close = std::string_view::npos;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[') ++depth;
    if (s[i] == ')' || s[i] == ']') --depth;
    if (depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string_view::npos || m.name.empty()) return false;
  bool first = true;
  for (std::string_view p : split_top_level(s.substr(open + 1, close - open - 1))) {
    CodeParameter param;
    std::string_view decl = p;
    const size_t eq = decl.find('=');
    if (eq != std::string_view::npos) {
      param.default_value = std::string(trim(decl.substr(eq + 1)));
      decl = trim(decl.substr(0, eq));
    }
    const size_t colon = decl.find(':');
    param.name = std::string(trim(decl.substr(0, colon)));
    if (colon != std::string_view::npos) param.type = std::string(trim(decl.substr(colon + 1)));
    if (first && param.name == "self") {
      first = false;
      continue;
    }
    first = false;
    m.parameters.push_back(std::move(param));
  }
  std::string_view rest = trim(s.substr(close + 1));
  if (starts_with(rest, "->")) m.return_type = std::string(trim(rest.substr(2)));
  return true;
}

// Joins a `def` that spans lines, starting at lines[*i]; advances *i to its last line.
std::string join_def(const std::vector<std::string_view>& lines, size_t* i) {
  std::string joined;
  int depth = 0;
  for (size_t k = *i; k < lines.size(); ++k) {
    std::string_view l = trim(lines[k]);
    if (!joined.empty() && joined.back() != '(' ) joined += ' ';
    joined.append(l.data(), l.size());
    for (char c : l) {
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
    }
    if (depth <= 0 && !l.empty() && l.back() == ':') {
      *i = k;
      joined.pop_back();  // the ':'
      return joined;
    }
  }
  *i = lines.size() - 1;
  return joined;
}

}  // namespace

std::string CodeMethod::signature() const {
  std::string s = name + "(";
  for (size_t i = 0; i < parameters.size(); ++i) {
    const CodeParameter& p = parameters[i];
    if (i > 0) s += ", ";
    s += p.name;
    if (!p.type.empty()) s += ": " + p.type;
    if (!p.default_value.empty()) s += "=" + p.default_value;
  }
  s += ")";
  if (!return_type.empty()) s += " -> " + return_type;
  return s;
}

std::string code_module_name(std::string_view record) {
  std::string_view s = record;
  if (starts_with(s, "code/")) s.remove_prefix(5);
  if (s.size() >= 3 && s.substr(s.size() - 3) == ".py") s.remove_suffix(3);
  std::string out(s);
  for (char& c : out) {
    if (c == '/') c = '.';
  }
  return out;
}

CodeFile parse_torchscript_code(std::string_view source, const std::string& record) {
  CodeFile file;
  file.record = record;
  file.module_name = code_module_name(record);
  const std::vector<std::string_view> lines = split_lines(source);
  CodeClass* current = nullptr;
  size_t class_indent = 0;

  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view raw = lines[i];
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    const size_t indent = indent_of(raw);
    if (current != nullptr && indent <= class_indent) {
      current->end_line = i;
      current = nullptr;
    }
    if (indent == 0 && starts_with(line, "class ")) {
      CodeClass c;
      std::string_view head = line.substr(6);
      if (!head.empty() && head.back() == ':') head.remove_suffix(1);
      const size_t paren = head.find('(');
      c.qualified_name = file.module_name + "." + std::string(trim(head.substr(0, paren)));
      if (paren != std::string_view::npos && head.back() == ')') {
        c.base = std::string(trim(head.substr(paren + 1, head.size() - paren - 2)));
      }
      c.record = record;
      c.first_line = i;
      c.end_line = lines.size();
      file.classes.push_back(std::move(c));
      current = &file.classes.back();
      class_indent = 0;
      continue;
    }
    if (starts_with(line, "def ")) {
      CodeMethod m;
      const std::string joined = join_def(lines, &i);
      if (!parse_signature(std::string_view(joined).substr(4), m)) continue;
      if (current != nullptr && indent == class_indent + 2) current->methods.push_back(std::move(m));
      else if (current == nullptr && indent == 0) file.functions.push_back(std::move(m));
      continue;
    }
    if (current == nullptr || indent != class_indent + 2) continue;
    const std::string_view target = trim(line.substr(0, line.find('=')));
    if (target == "__parameters__") {
      current->declares_parameters = true;
      current->parameters = parse_name_list(line.substr(line.find('=') + 1));
    } else if (target == "__buffers__") {
      current->declares_buffers = true;
      current->buffers = parse_name_list(line.substr(line.find('=') + 1));
    } else {
      const size_t colon = line.find(" : ");
      if (colon == std::string_view::npos && line.find('=') != std::string_view::npos &&
          !starts_with(target, "__annotations__")) {
        current->other_assignments.emplace_back(target);
      } else if (colon != std::string_view::npos) {
        std::string_view type = line.substr(colon + 3);
        const size_t eq = type.find(" = ");
        if (eq != std::string_view::npos) type = type.substr(0, eq);
        current->attributes.push_back({std::string(trim(line.substr(0, colon))), std::string(trim(type))});
      }
    }
  }
  return file;
}

namespace {

struct CodeToken {
  enum Kind { Name, String, Other } kind;
  std::string_view text;  // a String's content, without quotes or prefix
};

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Python's tokens, as far as names go: names, string literals (any prefix,
// triple-quoted or not), and single characters; numbers become Other, so the
// dot of 1.5 is not an attribute access. Comments, whitespace and backslash
// continuations are dropped.
std::vector<CodeToken> code_tokens(std::string_view s) {
  std::vector<CodeToken> out;
  out.reserve(s.size() / 4);  // printed code: about a token per four bytes
  size_t i = 0;
  const auto string_at = [&](size_t at) {  // s[at] is a quote; returns the index past the literal
    const char q = s[at];
    const std::string_view three = q == '"' ? std::string_view("\"\"\"") : std::string_view("'''");
    const bool triple = s.substr(at, 3) == three;
    const size_t open = triple ? 3 : 1;
    size_t j = at + open;
    while (j < s.size()) {
      if (s[j] == '\\') {
        j += 2;
      } else if (triple ? s.substr(j, 3) == three : s[j] == q) {
        break;
      } else if (!triple && s[j] == '\n') {
        break;  // unterminated: the line ends it
      } else {
        ++j;
      }
    }
    const size_t end = std::min(j, s.size());
    out.push_back({CodeToken::String, s.substr(at + open, end - at - open)});
    return std::min(end + (j < s.size() && s[j] != '\n' ? open : 0), s.size());
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '\'' || c == '"') {
      i = string_at(i);
    } else if (name_start(c)) {
      size_t j = i;
      while (j < s.size() && name_char(s[j])) ++j;
      const std::string_view word = s.substr(i, j - i);
      if (j < s.size() && (s[j] == '\'' || s[j] == '"') && word.size() <= 2 &&
          word.find_first_not_of("rRbBuUfF") == std::string_view::npos) {
        i = string_at(j);  // r"...", b'...', f"..."
      } else {
        out.push_back({CodeToken::Name, word});
        i = j;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < s.size() && (name_char(s[i]) || s[i] == '.')) ++i;
      out.push_back({CodeToken::Other, {}});
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == '\\') {
      ++i;
    } else {
      out.push_back({CodeToken::Other, s.substr(i, 1)});
      ++i;
    }
  }
  return out;
}

bool is_identifier(std::string_view s) {
  return !s.empty() && name_start(s[0]) && std::all_of(s.begin(), s.end(), name_char);
}

bool is_char(const std::vector<CodeToken>& t, size_t i, char c) {
  return i < t.size() && t[i].kind == CodeToken::Other && t[i].text.size() == 1 && t[i].text[0] == c;
}

// The dotted name starting at token i (a name, or getattr(<dotted>, "literal")),
// with the attributes after it; "" when there is none. *end: the token after it.
std::string dotted_at(const std::vector<CodeToken>& t, size_t i, size_t* end, int depth = 0) {
  std::string name;
  if (i >= t.size() || t[i].kind != CodeToken::Name || depth > 64) return name;
  size_t j = i + 1;
  size_t inner_end = 0;
  std::string inner;
  if (t[i].text == "getattr" && is_char(t, i + 1, '(') &&
      !(inner = dotted_at(t, i + 2, &inner_end, depth + 1)).empty() && is_char(t, inner_end, ',') &&
      inner_end + 1 < t.size() && t[inner_end + 1].kind == CodeToken::String &&
      is_identifier(t[inner_end + 1].text) && is_char(t, inner_end + 2, ')')) {
    name = inner + "." + std::string(t[inner_end + 1].text);
    j = inner_end + 3;
  } else {
    name = std::string(t[i].text);
  }
  while (is_char(t, j, '.') && j + 1 < t.size() && t[j + 1].kind == CodeToken::Name) {
    name += ".";
    name += t[j + 1].text;
    j += 2;
  }
  *end = j;
  return name;
}

}  // namespace

std::vector<std::string> code_dotted_names(std::string_view source) {
  const std::vector<CodeToken> tokens = code_tokens(source);
  std::vector<std::string> names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].kind != CodeToken::Name || is_char(tokens, i - 1, '.')) continue;
    const bool root = tokens[i].text == "torch" || tokens[i].text == "ops";
    if (!root && !is_char(tokens, i + 1, '.') && !(tokens[i].text == "getattr" && is_char(tokens, i + 1, '('))) {
      continue;
    }
    size_t end = 0;
    std::string name = dotted_at(tokens, i, &end);
    if (root || name.find('.') != std::string::npos) names.push_back(std::move(name));
  }
  return names;
}

}  // namespace tsarchive
