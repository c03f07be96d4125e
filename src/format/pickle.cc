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

namespace tsarchive {

const std::string* PickleGraph::string_at(PickleRef ref) const {
  if (ref >= nodes_.size() || nodes_[ref].kind != PickleKind::String) return nullptr;
  return &nodes_[ref].text;
}

bool PickleGraph::is_global(PickleRef ref, std::string_view module, std::string_view name) const {
  if (ref >= nodes_.size()) return false;
  const PickleNode& n = nodes_[ref];
  return n.kind == PickleKind::Global && n.text == module && n.text2 == name;
}

std::string PickleGraph::call_target(PickleRef ref) const {
  if (ref >= nodes_.size() || nodes_[ref].kind != PickleKind::Call) return {};
  const PickleRef fn = nodes_[ref].a;
  if (fn >= nodes_.size() || nodes_[fn].kind != PickleKind::Global) return {};
  return nodes_[fn].text + "." + nodes_[fn].text2;
}

const std::vector<PickleRef>& PickleGraph::call_args(PickleRef ref) const {
  static const std::vector<PickleRef> kEmpty;
  if (ref >= nodes_.size() || nodes_[ref].kind != PickleKind::Call) return kEmpty;
  const PickleRef args = nodes_[ref].b;
  if (args >= nodes_.size() || nodes_[args].kind != PickleKind::Tuple) return kEmpty;
  return nodes_[args].items;
}

constexpr size_t kMaxReservedNodes = 1 << 20;

class PickleParser {
 public:
  PickleParser(std::string_view bytes, const std::string& what, size_t offset, const PickleLimits& limits)
      : reader_(bytes, what), what_(what), limits_(limits) {
    reader_.skip(offset);
    // A value takes about four bytes of pickle in TorchScript's data.pkl:
    // reserving for that up front saves the copies (and the page faults) of
    // growing the vector, a third of inspect's work on a many-tensor archive.
    // Untouched capacity costs address space, not memory; capped all the same.
    graph_.nodes_.reserve(std::min<size_t>({limits.max_nodes, (bytes.size() - offset) / 3 + 16, kMaxReservedNodes}));
  }

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

  PickleRef add(PickleNode node) {
    if (graph_.nodes_.size() >= limits_.max_nodes) fail("more than " + std::to_string(limits_.max_nodes) + " values");
    graph_.nodes_.push_back(std::move(node));
    return static_cast<PickleRef>(graph_.nodes_.size() - 1);
  }
  PickleRef add(PickleKind kind) {
    PickleNode n;
    n.kind = kind;
    return add(std::move(n));
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

  // Pops everything above the last MARK, and the mark.
  std::vector<PickleRef> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  PickleRef container(PickleKind kind, std::vector<PickleRef> items) {
    PickleNode n;
    n.kind = kind;
    n.items = std::move(items);
    return add(std::move(n));
  }

  PickleRef string_node(PickleKind kind, std::string_view s) {
    PickleNode n;
    n.kind = kind;
    n.text = std::string(s);
    return add(std::move(n));
  }

  PickleRef int_node(int64_t v) {
    PickleNode n;
    n.kind = PickleKind::Int;
    n.integer = v;
    return add(std::move(n));
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

  PickleRef global_node(std::string_view module, std::string_view name) {
    PickleNode n;
    n.kind = PickleKind::Global;
    n.text = std::string(module);
    n.text2 = std::string(name);
    return add(std::move(n));
  }

  PickleRef call_node(PickleRef fn, PickleRef args) {
    PickleNode n;
    n.kind = PickleKind::Call;
    n.a = fn;
    n.b = args;
    return add(std::move(n));
  }

  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo key " + std::to_string(index) + " was never stored");
    push(it->second);
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

  void set_items(PickleRef target, const std::vector<PickleRef>& kv) {
    if (kv.size() % 2 != 0) fail("SETITEMS with an odd number of values");
    for (size_t i = 0; i < kv.size(); i += 2) node(target).entries.emplace_back(kv[i], kv[i + 1]);
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: reader_.u8(); break;          // PROTO
      case 0x95: reader_.u64(); break;         // FRAME: framing is only a hint
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case '0': pop(); break;                  // POP
      case '1': pop_mark(); break;             // POP_MARK
      case '2': push(top()); break;            // DUP
      case 'N': push(add(PickleKind::None)); break;
      case 0x88:
      case 0x89: {
        PickleNode n;
        n.kind = PickleKind::Bool;
        n.boolean = op == 0x88;
        push(add(std::move(n)));
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
        push(add(std::move(n)));
        break;
      }
      case 'F': {  // FLOAT (text)
        std::string s(reader_.line());
        char* endp = nullptr;
        PickleNode n;
        n.kind = PickleKind::Float;
        n.real = std::strtod(s.c_str(), &endp);
        if (s.empty() || *endp != '\0') fail("bad float literal");
        push(add(std::move(n)));
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
      case 'B': push(string_node(PickleKind::Bytes, sized(reader_.u32()))); break;   // BINBYTES
      case 'C': push(string_node(PickleKind::Bytes, sized(reader_.u8()))); break;    // SHORT_BINBYTES
      case 0x8e:                                                                      // BINBYTES8
      case 0x96: push(string_node(PickleKind::Bytes, sized(reader_.u64()))); break;  // BYTEARRAY8
      case ')': push(container(PickleKind::Tuple, {})); break;                        // EMPTY_TUPLE
      case 't': push(container(PickleKind::Tuple, pop_mark())); break;               // TUPLE
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
      case 'l': push(container(PickleKind::List, pop_mark())); break;  // LIST
      case 'a': {                                                        // APPEND
        PickleRef v = pop();
        node(top()).items.push_back(v);
        break;
      }
      case 'e': {  // APPENDS
        std::vector<PickleRef> vs = pop_mark();
        auto& items = node(top()).items;
        items.insert(items.end(), vs.begin(), vs.end());
        break;
      }
      case '}': push(add(PickleKind::Dict)); break;  // EMPTY_DICT
      case 'd': {                                     // DICT
        std::vector<PickleRef> kv = pop_mark();
        PickleRef d = add(PickleKind::Dict);
        set_items(d, kv);
        push(d);
        break;
      }
      case 's': {  // SETITEM
        PickleRef v = pop(), k = pop();
        node(top()).entries.emplace_back(k, v);
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<PickleRef> kv = pop_mark();
        set_items(top(), kv);
        break;
      }
      case 0x8f: push(add(PickleKind::Set)); break;  // EMPTY_SET
      case 0x90: {                                    // ADDITEMS
        std::vector<PickleRef> vs = pop_mark();
        auto& items = node(top()).items;
        items.insert(items.end(), vs.begin(), vs.end());
        break;
      }
      case 0x91: push(container(PickleKind::Set, pop_mark())); break;  // FROZENSET
      case 'c': {                                                       // GLOBAL "module\nname\n"
        std::string_view module = reader_.line();
        std::string_view name = reader_.line();
        push(global_node(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        PickleRef name = pop(), module = pop();
        const std::string* m = graph_.string_at(module);
        const std::string* n = graph_.string_at(name);
        if (m == nullptr || n == nullptr) fail("STACK_GLOBAL needs two strings");
        push(global_node(*m, *n));
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
        push(add(std::move(n)));
        break;
      }
      case 'q': memo_put(reader_.u8()); break;                       // BINPUT
      case 'r': memo_put(reader_.u32()); break;                      // LONG_BINPUT
      case 'p': memo_put(static_cast<uint64_t>(text_int(reader_.line()))); break;  // PUT
      case 'h': memo_get(reader_.u8()); break;                       // BINGET
      case 'j': memo_get(reader_.u32()); break;                      // LONG_BINGET
      case 'g': memo_get(static_cast<uint64_t>(text_int(reader_.line()))); break;  // GET
      case 0x94: memo_put(memo_.size()); break;                      // MEMOIZE
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
  std::unordered_map<uint64_t, PickleRef> memo_;
  size_t op_offset_ = 0;
};

PickleGraph parse_pickle(std::string_view bytes, const std::string& what, size_t offset, size_t* end,
                         const PickleLimits& limits) {
  if (offset > bytes.size()) throw_bad_input(what + ": pickle starts past the end of its data");
  return PickleParser(bytes, what, offset, limits).parse(end);
}

}  // namespace tsarchive
