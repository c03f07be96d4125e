// Safe pickle reader; the opcode list and the safety argument are in pickle.h.
#include "format/pickle.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "format/byte_source.h"
#include "base/error.h"
#include "base/utf8.h"

namespace tsarchive {

std::optional<std::string_view> PickleGraph::string_at(PickleRef ref) const {
  if (ref >= nodes_.size() || nodes_[ref].kind != PickleKind::String) return std::nullopt;
  return text(nodes_[ref]);
}

bool PickleGraph::is_global(PickleRef ref, std::string_view module, std::string_view name) const {
  if (ref >= nodes_.size()) return false;
  const PickleNode& n = nodes_[ref];
  return n.kind == PickleKind::Global && text(n) == module && text2(n) == name;
}

const PickleNode* PickleGraph::callable(PickleRef ref) const {
  if (ref >= nodes_.size() || nodes_[ref].kind != PickleKind::Call) return nullptr;
  const PickleRef fn = nodes_[ref].a;
  if (fn >= nodes_.size() || nodes_[fn].kind != PickleKind::Global) return nullptr;
  return &nodes_[fn];
}

bool PickleGraph::calls(PickleRef ref, std::string_view module, std::string_view name) const {
  return callable(ref) != nullptr && is_global(nodes_[ref].a, module, name);
}

std::string PickleGraph::global_name(const PickleNode& n) const {
  if (n.kind != PickleKind::Global) return {};
  std::string name(text(n));
  name += '.';
  name += text2(n);
  return name;
}

std::string PickleGraph::call_target(PickleRef ref) const {
  const PickleNode* fn = callable(ref);
  return fn != nullptr ? global_name(*fn) : std::string();
}

PickleSpan<PickleRef> PickleGraph::call_args(PickleRef ref) const {
  if (ref >= nodes_.size() || nodes_[ref].kind != PickleKind::Call) return {};
  const PickleRef args = nodes_[ref].b;
  if (args >= nodes_.size() || nodes_[args].kind != PickleKind::Tuple) return {};
  return items(nodes_[args]);
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// CPython's _PyUnicode_DecodeRawUnicodeEscapeStateful (3.x).
std::optional<std::string> decode_pickle_unicode(std::string_view in, std::string* why) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i++]);
    if (c != '\\' || i == in.size()) {  // a trailing backslash is itself
      append_utf8(out, c);
      continue;
    }
    const char kind = in[i++];
    if (kind != 'u' && kind != 'U') {  // both bytes as they are: "\\\\u" is two backslashes and a u
      append_utf8(out, '\\');
      append_utf8(out, static_cast<unsigned char>(kind));
      continue;
    }
    const size_t digits = kind == 'u' ? 4 : 8;
    uint32_t cp = 0;
    for (size_t k = 0; k < digits; ++k) {
      const int d = i < in.size() ? hex_digit(in[i]) : -1;
      if (d < 0) {
        *why = std::string("a truncated \\") + kind + " escape, on which the unpickler fails";
        return std::nullopt;
      }
      cp = (cp << 4) | static_cast<uint32_t>(d);
      ++i;
    }
    if (cp > 0x10FFFF) {
      *why = "a \\U escape past U+10FFFF, on which the unpickler fails";
      return std::nullopt;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      *why = "a lone surrogate (\\u" + std::string(in.substr(i - 4, 4)) +
             "), which no UTF-8 name or record holds: torch.load fails on it, a reader of the bytes does not";
      return std::nullopt;
    }
    append_utf8(out, cp);
  }
  return out;
}

// CPython's load_string: the quotes, PyBytes_DecodeEscape, then the encoding.
std::optional<std::string> decode_pickle_string(std::string_view in, std::string* why) {
  if (in.size() < 2 || (in.front() != '\'' && in.front() != '"') || in.back() != in.front()) {
    *why = "a STRING operand without quotes, on which the unpickler fails";
    return std::nullopt;
  }
  in = in.substr(1, in.size() - 2);
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const char c = in[i++];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i == in.size()) {
      *why = "a STRING that ends with a backslash, on which the unpickler fails";
      return std::nullopt;
    }
    const char e = in[i++];
    switch (e) {
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case 'x': {
        const int hi = i < in.size() ? hex_digit(in[i]) : -1;
        const int lo = i + 1 < in.size() ? hex_digit(in[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
          *why = "a STRING with an invalid \\x escape, on which the unpickler fails";
          return std::nullopt;
        }
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        break;
      }
      default: {
        if (e < '0' || e > '7') {
          // Kept as a backslash and the byte today, deprecated since Python 3.6.
          *why = std::string("a STRING with the escape \\") + e + ", which Python keeps as two characters "
                 "but deprecates: no pickler writes it";
          return std::nullopt;
        }
        unsigned value = static_cast<unsigned>(e - '0');
        for (int k = 0; k < 2 && i < in.size() && in[i] >= '0' && in[i] <= '7'; ++k) {
          value = value * 8 + static_cast<unsigned>(in[i++] - '0');
        }
        if (value > 0377) {
          *why = "a STRING with an octal escape past \\377, which Python cuts to a byte but deprecates: no "
                 "pickler writes it";
          return std::nullopt;
        }
        out += static_cast<char>(value);
      }
    }
  }
  if (!is_valid_utf8(out)) {
    *why = "a STRING whose bytes are not UTF-8, torch.load's encoding: it fails on them, and a loader given "
           "encoding='latin1' reads another text";
    return std::nullopt;
  }
  return out;
}

// Most of what inspect touches on a many-tensor archive is nodes: keep them small.
static_assert(sizeof(PickleNode) <= 48, "PickleNode grew");

constexpr size_t kMaxReservedNodes = 1 << 20;

class PickleParser {
 public:
  PickleParser(std::string_view bytes, const std::string& what, size_t offset, const PickleLimits& limits)
      : reader_(bytes, what), what_(what), limits_(limits) {
    reader_.skip(offset);
    if (bytes.size() - offset >= PickleGraph::kDecodedRun) fail("a pickle of 2 GiB or more");
    graph_.text_ = bytes.substr(offset);
    // A value takes about four bytes of pickle in TorchScript's data.pkl:
    // reserving for that up front saves the copies (and the page faults) of
    // growing the vector, a third of inspect's work on a many-tensor archive.
    // Untouched capacity costs address space, not memory; capped all the same.
    const size_t expected = std::min<size_t>({limits.max_nodes, (bytes.size() - offset) / 3 + 16, kMaxReservedNodes});
    graph_.nodes_.reserve(expected);
    graph_.item_pool_.reserve(expected);
  }

  // Gives `graph` the pickle's bytes, from its first opcode to STOP, that
  // the text runs of its nodes index.
  static void keep(PickleGraph& graph, std::shared_ptr<const std::string> bytes) {
    graph.bytes_ = std::move(bytes);
    graph.text_ = *graph.bytes_;
  }

  // Parses up to STOP; text runs index the bytes from `offset` on.
  PickleGraph parse(size_t* end) {
    for (;;) {
      op_offset_ = reader_.offset();
      const uint8_t op = reader_.u8();
      if (op == '.') break;  // STOP
      step(op);
    }
    if (stack_.size() != 1) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack, expected 1");
    if (!marks_.empty()) fail("STOP inside an unclosed MARK");
    graph_.root_ = stack_.back();
    if (end != nullptr) *end = reader_.offset();
    return std::move(graph_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw_bad_input(what_ + ": " + why + " (pickle offset " + std::to_string(op_offset_) + ")");
  }

  PickleRef add(const PickleNode& node) {
    if (graph_.nodes_.size() >= limits_.max_nodes) fail("more than " + std::to_string(limits_.max_nodes) + " values");
    graph_.nodes_.push_back(node);
    return static_cast<PickleRef>(graph_.nodes_.size() - 1);
  }
  PickleRef add(PickleKind kind) {
    PickleNode n;
    n.kind = kind;
    return add(n);
  }
  PickleNode& node(PickleRef ref) { return graph_.nodes_[ref]; }
  void push(PickleRef ref) { stack_.push_back(ref); }

  PickleRef pop() {
    if (stack_.size() <= base()) fail("pop from an empty stack");
    PickleRef r = stack_.back();
    stack_.pop_back();
    return r;
  }
  PickleRef top() {
    if (stack_.size() <= base()) fail("empty stack");
    return stack_.back();
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }

  // The values above the last MARK, which the caller consumes and then drops
  // with drop_mark(); no copy of them is made.
  PickleSpan<PickleRef> marked() {
    if (marks_.empty()) fail("no MARK on the stack");
    const size_t m = marks_.back();
    return {stack_.data() + m, stack_.size() - m};
  }
  void drop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    stack_.resize(marks_.back());
    marks_.pop_back();
  }
  // The value just below the last MARK: what APPENDS, ADDITEMS and SETITEMS add to.
  PickleRef below_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    const size_t m = marks_.back();
    const size_t floor = marks_.size() > 1 ? marks_[marks_.size() - 2] : 0;
    if (m <= floor) fail("empty stack");
    return stack_[m - 1];
  }

  // Appends `values` to a node's run of `pool`. A run at the pool's end just
  // grows; any other moves to the end with room to spare (kept in `spare`), so
  // interleaved APPENDs to many lists cost amortised constant time, and the
  // pool stays within a small factor of the values it holds.
  template <typename T>
  void append(std::vector<T>& pool, std::unordered_map<PickleRef, uint32_t>& spare, PickleRef target,
              PickleSlice PickleNode::*run, PickleSpan<T> values) {
    if (values.empty()) return;
    PickleSlice& slice = node(target).*run;
    const uint64_t grown = uint64_t{slice.size} + values.size();
    const uint64_t limit = std::min<uint64_t>(4 * uint64_t{limits_.max_nodes}, UINT32_MAX / 4);
    if (pool.size() + 2 * grown > limit) fail("containers hold more than " + std::to_string(limit) + " values in all");
    if (slice.begin + slice.size == pool.size()) {
      pool.insert(pool.end(), values.begin(), values.end());
    } else {
      uint32_t& room = spare[target];
      if (grown > room) {
        const size_t begin = pool.size();
        room = static_cast<uint32_t>(2 * grown);
        pool.resize(begin + room);
        std::copy_n(pool.begin() + slice.begin, slice.size, pool.begin() + static_cast<std::ptrdiff_t>(begin));
        slice.begin = static_cast<uint32_t>(begin);
      }
      std::copy(values.begin(), values.end(), pool.begin() + slice.begin + slice.size);
    }
    slice.size = static_cast<uint32_t>(grown);
  }
  void append_items(PickleRef target, PickleSpan<PickleRef> values) {
    append(graph_.item_pool_, spare_items_, target, &PickleNode::items, values);
  }
  void append_entries(PickleRef target, PickleSpan<PickleEntry> values) {
    append(graph_.entry_pool_, spare_entries_, target, &PickleNode::entries, values);
  }

  PickleRef container(PickleKind kind, PickleSpan<PickleRef> items) {
    PickleNode n;
    n.kind = kind;
    n.items.begin = static_cast<uint32_t>(graph_.item_pool_.size());
    const PickleRef ref = add(n);
    append_items(ref, items);
    return ref;
  }
  PickleRef container(PickleKind kind, std::initializer_list<PickleRef> items) {
    return container(kind, PickleSpan<PickleRef>(items.begin(), items.size()));
  }
  PickleRef marked_container(PickleKind kind) {
    const PickleRef ref = container(kind, marked());
    drop_mark();
    return ref;
  }

  // Where `s`, a view of the input, lies from the pickle's first opcode.
  PickleSlice slice_of(std::string_view s) const {
    return {static_cast<uint32_t>(s.data() - graph_.text_.data()), static_cast<uint32_t>(s.size())};
  }

  PickleRef string_node(PickleKind kind, std::string_view s) {
    PickleNode n;
    n.kind = kind;
    n.text = slice_of(s);
    return add(n);
  }
  // UNICODE and STRING: the text the unpickler makes, kept beside the pickle.
  PickleRef decoded_string_node(std::optional<std::string> text, const std::string& why) {
    if (!text) fail(why);
    if (text->size() >= PickleGraph::kDecodedRun - graph_.decoded_.size()) fail("decoded texts of 2 GiB or more");
    PickleNode n;
    n.kind = PickleKind::String;
    n.text = {static_cast<uint32_t>(graph_.decoded_.size()) | PickleGraph::kDecodedRun, static_cast<uint32_t>(text->size())};
    graph_.decoded_ += *text;
    return add(n);
  }

  PickleRef int_node(int64_t v) {
    PickleNode n;
    n.kind = PickleKind::Int;
    n.integer = v;
    return add(n);
  }

  // LONG1/LONG4 payload: little-endian two's complement.
  PickleRef long_node(std::string_view bytes) {
    if (bytes.size() > 8) return string_node(PickleKind::BigInt, bytes);
    uint64_t v = 0;
    for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
    if (!bytes.empty() && bytes.size() < 8 && (static_cast<uint8_t>(bytes.back()) & 0x80)) {
      v |= ~uint64_t{0} << (8 * bytes.size());
    }
    return int_node(static_cast<int64_t>(v));
  }

  // GLOBAL's two lines and STACK_GLOBAL's two strings alike: runs of the pickle.
  PickleRef global_node(PickleSlice module, PickleSlice name) {
    PickleNode n;
    n.kind = PickleKind::Global;
    n.text = module;
    n.text2 = name;
    return add(n);
  }

  PickleRef call_node(PickleRef fn, PickleRef args) {
    PickleNode n;
    n.kind = PickleKind::Call;
    n.a = fn;
    n.b = args;
    return add(n);
  }

  // Picklers number memo keys 0, 1, 2, ...: those below the count of bytes
  // read so far go in a vector, any other in a map.
  void memo_put(uint64_t index) {
    const PickleRef value = top();
    PickleRef* slot = nullptr;
    if (index < memo_.size()) {
      slot = &memo_[index];
    } else if (index < reader_.offset() + 256) {
      memo_.resize(index + 1, kNoPickleRef);
      slot = &memo_[index];
    } else {
      slot = &sparse_memo_.try_emplace(index, kNoPickleRef).first->second;
    }
    if (*slot == kNoPickleRef) ++memo_size_;
    *slot = value;
  }
  void memo_get(uint64_t index) {
    PickleRef ref = kNoPickleRef;
    if (index < memo_.size()) {
      ref = memo_[index];
    } else if (auto it = sparse_memo_.find(index); it != sparse_memo_.end()) {
      ref = it->second;
    }
    if (ref == kNoPickleRef) fail("memo key " + std::to_string(index) + " was never stored");
    push(ref);
  }

  std::string_view sized(uint64_t n) {
    if (n > reader_.remaining()) {
      fail("a " + std::to_string(n) + "-byte value runs past the end (" + std::to_string(reader_.remaining()) +
           " bytes left)");
    }
    return reader_.bytes(n);
  }

  int64_t text_int(std::string_view line) {
    std::string s(line);
    if (!s.empty() && s.back() == 'L') s.pop_back();
    if (s == "00") return 0;  // protocol 0 False
    if (s == "01") return 1;  // protocol 0 True
    char* endp = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &endp, 10);
    if (s.empty() || *endp != '\0' || errno == ERANGE) fail("bad integer literal");
    return v;
  }

  // SETITEMS and DICT: key, value, key, value, ... above the last MARK.
  void set_marked_items(PickleRef target) {
    const PickleSpan<PickleRef> kv = marked();
    if (kv.size() % 2 != 0) fail("SETITEMS with an odd number of values");
    entry_buffer_.clear();
    for (size_t i = 0; i < kv.size(); i += 2) entry_buffer_.emplace_back(kv[i], kv[i + 1]);
    append_entries(target, PickleSpan<PickleEntry>(entry_buffer_.data(), entry_buffer_.size()));
    drop_mark();
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: reader_.u8(); break;          // PROTO
      case 0x95: reader_.u64(); break;         // FRAME: framing is only a hint
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case '0': pop(); break;                  // POP
      case '1': drop_mark(); break;            // POP_MARK
      case '2': push(top()); break;            // DUP
      case 'N': push(add(PickleKind::None)); break;
      case 0x88:
      case 0x89: {
        PickleNode n;
        n.kind = PickleKind::Bool;
        n.boolean = op == 0x88;
        push(add(n));
        break;
      }
      case 'J': push(int_node(static_cast<int32_t>(reader_.u32()))); break;  // BININT
      case 'K': push(int_node(reader_.u8())); break;                          // BININT1
      case 'M': push(int_node(reader_.u16())); break;                         // BININT2
      case 0x8a: push(long_node(sized(reader_.u8()))); break;                 // LONG1
      case 0x8b: {                                                            // LONG4
        const int32_t n = static_cast<int32_t>(reader_.u32());
        if (n < 0) fail("negative LONG4 length");
        push(long_node(sized(static_cast<uint64_t>(n))));
        break;
      }
      case 'I':
      case 'L': push(int_node(text_int(reader_.line()))); break;  // INT, LONG (text)
      case 'G': {                                                  // BINFLOAT, big-endian
        uint64_t bits = 0;
        for (char c : sized(8)) bits = (bits << 8) | static_cast<uint8_t>(c);
        PickleNode n;
        n.kind = PickleKind::Float;
        std::memcpy(&n.real, &bits, 8);
        push(add(n));
        break;
      }
      case 'F': {  // FLOAT (text)
        std::string s(reader_.line());
        char* endp = nullptr;
        PickleNode n;
        n.kind = PickleKind::Float;
        n.real = std::strtod(s.c_str(), &endp);
        if (s.empty() || *endp != '\0') fail("bad float literal");
        push(add(n));
        break;
      }
      case 'X': push(string_node(PickleKind::String, sized(reader_.u32()))); break;     // BINUNICODE
      case 0x8c: push(string_node(PickleKind::String, sized(reader_.u8()))); break;     // SHORT_BINUNICODE
      case 0x8d: push(string_node(PickleKind::String, sized(reader_.u64()))); break;    // BINUNICODE8
      case 'T': {                                                                        // BINSTRING
        const int32_t n = static_cast<int32_t>(reader_.u32());
        if (n < 0) fail("negative BINSTRING length");
        push(string_node(PickleKind::String, sized(static_cast<uint64_t>(n))));
        break;
      }
      case 'U': push(string_node(PickleKind::String, sized(reader_.u8()))); break;   // SHORT_BINSTRING
      case 'V': {                                                                     // UNICODE
        std::string why;
        std::optional<std::string> text = decode_pickle_unicode(reader_.line(), &why);
        push(decoded_string_node(std::move(text), why));
        break;
      }
      case 'S': {  // STRING
        std::string why;
        std::optional<std::string> text = decode_pickle_string(reader_.line(), &why);
        push(decoded_string_node(std::move(text), why));
        break;
      }
      case 'B': push(string_node(PickleKind::Bytes, sized(reader_.u32()))); break;   // BINBYTES
      case 'C': push(string_node(PickleKind::Bytes, sized(reader_.u8()))); break;    // SHORT_BINBYTES
      case 0x8e:                                                                      // BINBYTES8
      case 0x96: push(string_node(PickleKind::Bytes, sized(reader_.u64()))); break;  // BYTEARRAY8
      case ')': push(container(PickleKind::Tuple, {})); break;                        // EMPTY_TUPLE
      case 't': push(marked_container(PickleKind::Tuple)); break;                    // TUPLE
      case 0x85: {                                                                    // TUPLE1
        PickleRef x = pop();
        push(container(PickleKind::Tuple, {x}));
        break;
      }
      case 0x86: {  // TUPLE2
        PickleRef y = pop(), x = pop();
        push(container(PickleKind::Tuple, {x, y}));
        break;
      }
      case 0x87: {  // TUPLE3
        PickleRef z = pop(), y = pop(), x = pop();
        push(container(PickleKind::Tuple, {x, y, z}));
        break;
      }
      case ']': push(container(PickleKind::List, {})); break;          // EMPTY_LIST
      case 'l': push(marked_container(PickleKind::List)); break;  // LIST
      case 'a': {                                                   // APPEND
        const PickleRef v = pop();
        append_items(top(), PickleSpan<PickleRef>(&v, 1));
        break;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        const PickleRef target = below_mark();
        append_items(target, marked());
        drop_mark();
        break;
      }
      case '}': push(add(PickleKind::Dict)); break;  // EMPTY_DICT
      case 'd': {                                     // DICT
        const PickleRef d = add(PickleKind::Dict);
        set_marked_items(d);
        push(d);
        break;
      }
      case 's': {  // SETITEM
        const PickleRef v = pop();
        const PickleEntry entry{pop(), v};
        append_entries(top(), PickleSpan<PickleEntry>(&entry, 1));
        break;
      }
      case 'u': set_marked_items(below_mark()); break;                 // SETITEMS
      case 0x8f: push(add(PickleKind::Set)); break;                    // EMPTY_SET
      case 0x91: push(marked_container(PickleKind::Set)); break;       // FROZENSET
      case 'c': {                                                       // GLOBAL "module\nname\n"
        const PickleSlice module = slice_of(reader_.line());
        const PickleSlice name = slice_of(reader_.line());
        push(global_node(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PickleRef name = pop(), module = pop();
        if (!graph_.string_at(module) || !graph_.string_at(name)) fail("STACK_GLOBAL needs two strings");
        push(global_node(node(module).text, node(name).text));
        break;
      }
      case 'R':     // REDUCE
      case 0x81: {  // NEWOBJ
        PickleRef args = pop(), fn = pop();
        push(call_node(fn, args));
        break;
      }
      case 0x92: {  // NEWOBJ_EX: cls, args, kwargs
        pop();      // kwargs are not needed to describe the object
        PickleRef args = pop(), fn = pop();
        push(call_node(fn, args));
        break;
      }
      case 'b': {  // BUILD
        PickleRef state = pop();
        node(top()).state = state;
        break;
      }
      case 'Q': {  // BINPERSID
        PickleNode n;
        n.kind = PickleKind::PersistentId;
        n.a = pop();
        push(add(n));
        break;
      }
      case 'q': memo_put(reader_.u8()); break;                       // BINPUT
      case 'r': memo_put(reader_.u32()); break;                      // LONG_BINPUT
      case 'p': memo_put(static_cast<uint64_t>(text_int(reader_.line()))); break;  // PUT
      case 'h': memo_get(reader_.u8()); break;                       // BINGET
      case 'j': memo_get(reader_.u32()); break;                      // LONG_BINGET
      case 'g': memo_get(static_cast<uint64_t>(text_int(reader_.line()))); break;  // GET
      case 0x94: memo_put(memo_size_); break;                        // MEMOIZE: key len(memo)
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }

  ByteReader reader_;
  std::string what_;
  PickleLimits limits_;
  PickleGraph graph_;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;
  std::vector<PickleRef> memo_;
  std::unordered_map<uint64_t, PickleRef> sparse_memo_;
  uint64_t memo_size_ = 0;  // keys stored, as Python's len(memo)
  std::unordered_map<PickleRef, uint32_t> spare_items_;  // room of runs moved to the pool's end
  std::unordered_map<PickleRef, uint32_t> spare_entries_;
  std::vector<PickleEntry> entry_buffer_;
  size_t op_offset_ = 0;
};

PickleGraph parse_pickle(std::string_view bytes, const std::string& what, size_t offset, size_t* end,
                         const PickleLimits& limits) {
  if (offset > bytes.size()) throw_bad_input(what + ": pickle starts past the end of its data");
  size_t stop = 0;
  PickleGraph graph = PickleParser(bytes, what, offset, limits).parse(&stop);
  PickleParser::keep(graph, std::make_shared<const std::string>(bytes.substr(offset, stop - offset)));
  if (end != nullptr) *end = stop;
  return graph;
}

PickleGraph parse_pickle(std::string&& bytes, const std::string& what, size_t offset, size_t* end,
                         const PickleLimits& limits) {
  if (offset > bytes.size()) throw_bad_input(what + ": pickle starts past the end of its data");
  bytes.erase(0, offset);  // text runs count from the pickle's first opcode
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  size_t stop = 0;
  PickleGraph graph = PickleParser(*owned, what, 0, limits).parse(&stop);
  PickleParser::keep(graph, std::move(owned));
  if (end != nullptr) *end = offset + stop;
  return graph;
}

}  // namespace tsarchive
