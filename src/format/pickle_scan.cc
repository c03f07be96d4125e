// Pickle scanner; what it records and why is at the top of pickle_scan.h.
#include "format/pickle_scan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "base/error.h"
#include "format/byte_source.h"
#include "format/pickle.h"

namespace tsarchive {
namespace {

constexpr size_t kMaxTupleItems = 8;    // enough for a persistent id's shape
constexpr size_t kMaxKeptText = 1024;   // of a string or a global's name; longer ones are cut
// Persistent ids kept for the storage checks: one per storage in a real file
// (a few short strings each); a flood of long ones stops being listed.
constexpr size_t kMaxPersistentIds = 1'000'000;
constexpr size_t kMaxPersistentIdText = 32u << 20;
// Values pushed, MARKs and memo entries, together: the bound the pickle reader
// keeps (PickleLimits::max_nodes), so that a small compressed pickle of
// millions of EMPTY_DICTs or MARKs ends the scan instead of the memory.
constexpr size_t kMaxValues = 4'000'000;
constexpr size_t kMaxReservedSymbols = 1u << 20;
// Memo keys below this live in a vector (picklers number them 0, 1, 2, ...);
// others in a map.
constexpr uint64_t kDenseMemoKeys = 1u << 20;
constexpr uint32_t kNoMemo = UINT32_MAX;

enum class SymKind : uint8_t { Other, None, Int, Str, Bytes, Global, Object, Dict, List, Tuple, Set, PersId };

constexpr uint32_t kNoText = UINT32_MAX;

// What one stack slot holds, as far as the loader's behaviour depends on it.
// Small and without allocations of its own (a data.pkl of 2,000 tensors makes
// 30,000 of them): its text and a tuple's items live in the Scanner's pools,
// and an object made by calling a global shares the global's text.
struct Symbol {
  SymKind kind = SymKind::Other;
  bool text_is_global = false;     // Object: made by calling a global
  uint32_t text = kNoText;         // Str: the value; Global: "module.name"; Object: what made it
  int64_t integer = 0;
  uint32_t size = 0;               // Tuple: its length
  uint32_t items_at = 0;           // Tuple: where its first kMaxTupleItems items start in the pool

  size_t kept_items() const { return std::min<size_t>(size, kMaxTupleItems); }
};

// Containers a SETITEM may fill without running a class's __setitem__.
bool dict_like(const Symbol& s, const std::string& text) {
  if (s.kind == SymKind::Dict) return true;
  return s.kind == SymKind::Object && s.text_is_global &&
         (text == "collections.OrderedDict" || text == "collections.Counter" || text == "builtins.dict" ||
          text == "collections.defaultdict" || text == "__builtin__.dict");
}

std::string cut(std::string_view s) {
  if (s.size() <= kMaxKeptText) return std::string(s);
  return std::string(s.substr(0, kMaxKeptText)) + "...";
}

std::string kind_word(SymKind k) {
  switch (k) {
    case SymKind::Other: return "value";
    case SymKind::None: return "None";
    case SymKind::Int: return "int";
    case SymKind::Str: return "str";
    case SymKind::Bytes: return "bytes";
    case SymKind::Global: return "global";
    case SymKind::Object: return "object";
    case SymKind::Dict: return "dict";
    case SymKind::List: return "list";
    case SymKind::Tuple: return "tuple";
    case SymKind::Set: return "set";
    case SymKind::PersId: return "persistent object";
  }
  return "value";
}

struct Stop {};  // the scan ended (error set)

class Scanner {
 public:
  Scanner(std::string_view bytes, size_t max_findings)
      : reader_(bytes, "pickle"), max_findings_(max_findings), text_budget_(bytes.size() + (16u << 20)) {
    // An opcode adds at most one symbol and takes at least one byte; a
    // PyTorch pickle adds about one per two bytes. Reserving that up front
    // spares the table's copies as it grows (pages are touched only as used).
    syms_.reserve(std::min<size_t>(bytes.size() / 2 + 16, kMaxReservedSymbols));
  }

  PickleScan run() {
    try {
      for (;;) {
        op_offset_ = reader_.offset();
        if (reader_.at_end()) {
          out_.ran_out = true;
          fail("the pickle ends before STOP");
        }
        const uint8_t op = reader_.u8();
        note_opcode(op);
        if (op == '.') {
          if (stack_.empty()) fail("STOP on an empty stack");
          if (stack_.size() > 1 || !marks_.empty()) {
            anomaly("STOP leaves " + std::to_string(stack_.size() - 1) + " more value(s) and " +
                    std::to_string(marks_.size()) + " MARK(s) on the stack, which no pickler writes");
          }
          if (frame_end_ > reader_.offset()) {
            // CPython's unpickler reads a whole frame at once from a file
            // without peek() (an unbuffered file, io.BytesIO): it would go on
            // after the frame, past bytes that a buffered reader reads next.
            anomaly("STOP inside a FRAME that declares " + std::to_string(frame_end_ - reader_.offset()) +
                    " more bytes: readers that take whole frames go on after them, others after STOP");
          }
          out_.complete = true;
          break;
        }
        step(op);
      }
    } catch (const Stop&) {
    } catch (const Error& e) {
      // ByteReader: an operand runs past the end.
      out_.ran_out = true;
      out_.error = "the pickle ends inside an opcode's operand (offset " + std::to_string(op_offset_) + ")";
    }
    out_.end = reader_.offset();
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    out_.error = why + " (offset " + std::to_string(op_offset_) + ")";
    throw Stop{};
  }
  void anomaly(const std::string& what) {
    if (out_.anomalies.size() < 100) out_.anomalies.push_back(what + " (offset " + std::to_string(op_offset_) + ")");
  }
  void note_opcode(uint8_t op) {
    if (!seen_[op]) {
      seen_[op] = true;
      out_.opcodes.push_back(op);
      out_.opcode_offsets.push_back(op_offset_);
    }
  }
  bool room() {
    if (out_.imports.size() + out_.calls.size() < max_findings_) return true;
    if (!truncated_) {
      truncated_ = true;
      anomaly("more than " + std::to_string(max_findings_) + " distinct imports and calls; the rest are not listed");
    }
    return false;
  }

  uint32_t add(Symbol s) {
    syms_.push_back(s);
    return static_cast<uint32_t>(syms_.size() - 1);
  }
  // A new text in the pool. Objects' texts are made from globals' ("<result
  // of ...>"): a few opcodes can copy a long name again and again. Kept text
  // stays within the pickle's own size and 16 MiB.
  uint32_t new_text(std::string t) {
    text_bytes_ += t.size();
    if (text_bytes_ > text_budget_) fail("its values name globals over and over, past what any PyTorch file holds");
    texts_.push_back(std::move(t));
    return static_cast<uint32_t>(texts_.size() - 1);
  }
  const std::string& text(const Symbol& s) const {
    static const std::string none;
    return s.text == kNoText ? none : texts_[s.text];
  }
  uint32_t add(SymKind k) {
    Symbol s;
    s.kind = k;
    return add(s);
  }
  void count_value() {
    if (++values_ > kMaxValues) {
      fail("more than " + std::to_string(kMaxValues) + " values, which no PyTorch file holds");
    }
  }
  void push(uint32_t s) {
    count_value();
    stack_.push_back(s);
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= base()) fail("pops from an empty stack");
    const uint32_t s = stack_.back();
    stack_.pop_back();
    return s;
  }
  uint32_t top() {
    if (stack_.size() <= base()) fail("reads the top of an empty stack");
    return stack_.back();
  }
  // The items above the last MARK, popped with it, in a buffer reused by the
  // next call.
  const std::vector<uint32_t>& pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    marked_.assign(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return marked_;
  }

  uint32_t tuple(const uint32_t* items, size_t count) {
    Symbol s;
    s.kind = SymKind::Tuple;
    s.size = static_cast<uint32_t>(count);  // count_value() keeps it under kMaxValues
    s.items_at = static_cast<uint32_t>(tuple_items_.size());
    tuple_items_.insert(tuple_items_.end(), items, items + s.kept_items());
    return add(s);
  }
  uint32_t tuple(const std::vector<uint32_t>& items) { return tuple(items.data(), items.size()); }
  uint32_t tuple(std::initializer_list<uint32_t> items) { return tuple(items.begin(), items.size()); }

  // A global, listed once per name and opcode (later imports of it count),
  // its text made once: a pickle that imports one long name over and over
  // costs the name once.
  static constexpr size_t kNotListed = SIZE_MAX;
  struct ImportedGlobal {
    uint32_t sym;   // the Global's symbol
    size_t listed;  // its index in out_.imports, or kNotListed
  };
  uint32_t import(std::string module, std::string name, const char* opcode) {
    return import_global(std::move(module), std::move(name), opcode).sym;
  }
  ImportedGlobal import_global(std::string module, std::string name, const char* opcode) {
    std::string full = cut(module) + "." + cut(name);
    const std::string key = full + '\n' + opcode;
    size_t listed = kNotListed;
    if (const auto seen = import_index_.find(key); seen != import_index_.end()) {
      listed = seen->second;
      ++out_.imports[listed].count;
    } else if (room()) {
      listed = out_.imports.size();
      import_index_.emplace(key, listed);
      PickleImport i;
      i.module = cut(module);
      i.name = cut(name);
      i.opcode = opcode;
      i.offset = op_offset_;
      out_.imports.push_back(std::move(i));
    }
    Symbol s;
    s.kind = SymKind::Global;
    const auto [text, fresh] = global_texts_.try_emplace(std::move(full), 0);
    if (fresh) text->second = new_text(text->first);
    s.text = text->second;
    return {add(s), listed};
  }

  // Records the call of `fn_sym` and returns the object it makes.
  uint32_t call(uint32_t fn_sym, const char* opcode) {
    const Symbol fn = syms_[fn_sym];
    Symbol result;
    result.kind = SymKind::Object;
    if (fn.kind == SymKind::Global) {
      result.text = fn.text;
      result.text_is_global = true;
    } else if (fn.kind == SymKind::Object) {
      result.text = new_text("<result of " + cut(text(fn)) + ">");
    } else {
      anomaly(std::string(opcode) + " calls a " + kind_word(fn.kind) + ", which is not callable");
      result.text = new_text("<a " + kind_word(fn.kind) + ">");
    }
    record_call(text(result), result.text_is_global, opcode);
    return add(result);
  }
  // Listed once per callable and opcode, as imports are.
  void record_call(const std::string& callable, bool is_global, const char* opcode) {
    auto listed = calls_by_callable_.find(callable);
    if (listed != calls_by_callable_.end()) {
      for (const size_t i : listed->second) {  // a few opcodes at most
        if (out_.calls[i].callable_is_global == is_global && out_.calls[i].opcode == opcode) {
          ++out_.calls[i].count;
          return;
        }
      }
    }
    if (!room()) return;
    if (listed == calls_by_callable_.end()) listed = calls_by_callable_.emplace(callable, std::vector<size_t>{}).first;
    listed->second.push_back(out_.calls.size());
    PickleInvoke c;
    c.callable = cut(callable);
    c.callable_is_global = is_global;
    c.opcode = opcode;
    c.offset = op_offset_;
    out_.calls.push_back(std::move(c));
  }

  // A method of an object run by APPEND(S), ADDITEMS, SETITEM(S) or BUILD.
  void method_call(uint32_t target, const char* method, const char* opcode) {
    const Symbol& t = syms_[target];
    const std::string owner = t.kind == SymKind::Object ? text(t) : kind_word(t.kind);
    record_call(owner + "." + method, false, opcode);
  }

  void set_items(uint32_t target, const char* opcode) {
    const Symbol& t = syms_[target];
    if (dict_like(t, text(t))) return;
    if (t.kind == SymKind::Object) {
      method_call(target, "__setitem__", opcode);
      return;
    }
    anomaly(std::string(opcode) + " on a " + kind_word(t.kind) + ", not a dict");
  }
  void append_items(uint32_t target, const char* opcode, SymKind wanted, const char* method) {
    const Symbol& t = syms_[target];
    if (t.kind == wanted) return;
    if (t.kind == SymKind::Object) {
      method_call(target, method, opcode);
      return;
    }
    anomaly(std::string(opcode) + " on a " + kind_word(t.kind) + ", not a " + kind_word(wanted));
  }

  void persistent_id(uint32_t pid) {
    PicklePersistentId p;
    p.offset = op_offset_;
    const Symbol& s = syms_[pid];
    if (s.kind == SymKind::Tuple) {
      p.tuple = true;
      p.size = s.size;
      const auto item = [&](size_t i) -> const Symbol* {
        return i < s.kept_items() ? &syms_[tuple_items_[s.items_at + i]] : nullptr;
      };
      if (const Symbol* first = item(0); first && first->kind == SymKind::Str) p.first = text(*first);
      if (const Symbol* type = item(1); type && type->kind == SymKind::Global) p.storage_type = text(*type);
      if (const Symbol* key = item(2); key && key->kind == SymKind::Str) p.key = text(*key);
      if (const Symbol* numel = item(4); numel && numel->kind == SymKind::Int) p.numel = numel->integer;
    } else if (s.kind == SymKind::Str) {
      p.first = text(s);
    }
    const size_t bytes = p.first.size() + p.storage_type.size() + p.key.size();
    if (out_.persistent_ids.size() < kMaxPersistentIds && (pid_text_bytes_ += bytes) <= kMaxPersistentIdText) {
      out_.persistent_ids.push_back(std::move(p));
    } else if (!pids_truncated_) {
      pids_truncated_ = true;
      anomaly("more persistent ids than " + std::to_string(out_.persistent_ids.size()) +
              " (or longer), past what any PyTorch file holds; the rest are not checked");
    }
    push(add(SymKind::PersId));
  }

  uint32_t string(std::string_view s, SymKind kind = SymKind::Str) {
    Symbol sym;
    sym.kind = kind;
    if (kind == SymKind::Str) sym.text = new_text(cut(s));
    return add(sym);
  }
  uint32_t integer(int64_t v) {
    Symbol s;
    s.kind = SymKind::Int;
    s.integer = v;
    return add(s);
  }
  std::string_view sized(uint64_t n) {
    if (n > reader_.remaining()) {
      out_.ran_out = true;
      fail("a " + std::to_string(n) + "-byte operand runs past the end");
    }
    return reader_.bytes(n);
  }
  // LONG1/LONG4: little-endian two's complement; wide ones are just ints here.
  uint32_t long_bytes(std::string_view b) {
    uint64_t v = 0;
    for (size_t i = std::min<size_t>(b.size(), 8); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
    if (!b.empty() && b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80)) v |= ~uint64_t{0} << (8 * b.size());
    return integer(static_cast<int64_t>(v));
  }
  int64_t text_int(std::string_view line) {
    std::string s(line);
    if (!s.empty() && s.back() == 'L') s.pop_back();
    char* endp = nullptr;
    const long long v = std::strtoll(s.c_str(), &endp, 10);
    if (s.empty() || *endp != '\0') fail("a text integer that is not one");
    return v;
  }
  // Protocol 0's UNICODE and STRING: the text the unpickler makes of the
  // operand, which is the name a STACK_GLOBAL imports and the storage key
  // torch.load reads (pickle.h); what it fails on, or could read otherwise,
  // ends the scan.
  std::string decoded(std::optional<std::string> text, const std::string& why) {
    if (!text) fail(why);
    return std::move(*text);
  }

  void memo_put(uint64_t key) {
    count_value();
    const uint32_t value = top();
    if (key < kDenseMemoKeys) {
      if (key >= dense_memo_.size()) dense_memo_.resize(std::max<size_t>(key + 1, 2 * dense_memo_.size()), kNoMemo);
      if (dense_memo_[key] == kNoMemo) ++memo_size_;
      dense_memo_[key] = value;
      return;
    }
    if (memo_.insert_or_assign(key, value).second) ++memo_size_;
  }
  void memo_get(uint64_t key) {
    if (key < dense_memo_.size() && dense_memo_[key] != kNoMemo) return push(dense_memo_[key]);
    const auto it = key < kDenseMemoKeys ? memo_.end() : memo_.find(key);
    if (it == memo_.end()) fail("memo key " + std::to_string(key) + " was never stored");
    push(it->second);
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: out_.protocol = reader_.u8(); break;  // PROTO
      case 0x95: {                                     // FRAME
        const uint64_t length = reader_.u64();
        frame_end_ = reader_.offset() + std::min<uint64_t>(length, UINT64_MAX - reader_.offset());
        break;
      }
      case '(':
        count_value();
        marks_.push_back(stack_.size());
        break;
      case '0': pop(); break;
      case '1': pop_mark(); break;
      case '2': push(top()); break;
      case 'N': push(add(SymKind::None)); break;
      case 0x88:
      case 0x89: push(add(SymKind::Other)); break;
      case 'J': push(integer(static_cast<int32_t>(reader_.u32()))); break;
      case 'K': push(integer(reader_.u8())); break;
      case 'M': push(integer(reader_.u16())); break;
      case 'I':
      case 'L': push(integer(text_int(reader_.line()))); break;
      case 0x8a: push(long_bytes(sized(reader_.u8()))); break;
      case 0x8b: push(long_bytes(sized(reader_.u32()))); break;
      case 'G': sized(8); push(add(SymKind::Other)); break;
      case 'F': reader_.line(); push(add(SymKind::Other)); break;
      case 'S': {  // STRING
        std::string why;
        push(string(decoded(decode_pickle_string(reader_.line(), &why), why)));
        break;
      }
      case 'V': {  // UNICODE (raw-unicode-escape)
        std::string why;
        push(string(decoded(decode_pickle_unicode(reader_.line(), &why), why)));
        break;
      }
      case 'T': push(string(sized(reader_.u32()))); break;         // BINSTRING
      case 'U': push(string(sized(reader_.u8()))); break;          // SHORT_BINSTRING
      case 'X': push(string(sized(reader_.u32()))); break;         // BINUNICODE
      case 0x8c: push(string(sized(reader_.u8()))); break;         // SHORT_BINUNICODE
      case 0x8d: push(string(sized(reader_.u64()))); break;        // BINUNICODE8
      case 'B': push(string(sized(reader_.u32()), SymKind::Bytes)); break;
      case 'C': push(string(sized(reader_.u8()), SymKind::Bytes)); break;
      case 0x8e:
      case 0x96: push(string(sized(reader_.u64()), SymKind::Bytes)); break;
      case 0x97:  // NEXT_BUFFER
        anomaly("NEXT_BUFFER: an out-of-band buffer, which pickle.load without buffers= refuses");
        push(add(SymKind::Bytes));
        break;
      case 0x98: top(); break;  // READONLY_BUFFER
      case ')': push(tuple({})); break;
      case 't': push(tuple(pop_mark())); break;
      case 0x85: {
        const uint32_t a = pop();
        push(tuple({a}));
        break;
      }
      case 0x86: {
        const uint32_t b = pop(), a = pop();
        push(tuple({a, b}));
        break;
      }
      case 0x87: {
        const uint32_t c = pop(), b = pop(), a = pop();
        push(tuple({a, b, c}));
        break;
      }
      case ']': push(add(SymKind::List)); break;
      case 'l': pop_mark(); push(add(SymKind::List)); break;
      case '}': push(add(SymKind::Dict)); break;
      case 'd': {
        if (pop_mark().size() % 2 != 0) anomaly("DICT with an odd number of values");
        push(add(SymKind::Dict));
        break;
      }
      case 0x8f: push(add(SymKind::Set)); break;
      case 0x91: pop_mark(); push(add(SymKind::Set)); break;
      case 'a': {
        pop();
        append_items(top(), "APPEND", SymKind::List, "append");
        break;
      }
      case 'e': {
        pop_mark();
        append_items(top(), "APPENDS", SymKind::List, "extend");
        break;
      }
      case 0x90: {
        pop_mark();
        append_items(top(), "ADDITEMS", SymKind::Set, "add");
        break;
      }
      case 's': {
        pop();
        pop();
        set_items(top(), "SETITEM");
        break;
      }
      case 'u': {
        if (pop_mark().size() % 2 != 0) anomaly("SETITEMS with an odd number of values");
        set_items(top(), "SETITEMS");
        break;
      }
      case 'c': {  // GLOBAL
        std::string module(reader_.line());
        std::string name(reader_.line());
        push(import(std::move(module), std::move(name), "GLOBAL"));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const uint32_t name = pop(), module = pop();
        if (syms_[name].kind != SymKind::Str || syms_[module].kind != SymKind::Str) {
          fail("STACK_GLOBAL on values that are not two strings");
        }
        // The same two strings again (from the memo): the same global, without
        // building its name again.
        const uint64_t pair = (uint64_t{syms_[module].text} << 32) | syms_[name].text;
        if (const auto known = stack_globals_.find(pair); known != stack_globals_.end()) {
          if (known->second.listed != kNotListed) ++out_.imports[known->second.listed].count;
          push(add(syms_[known->second.sym]));
        } else {
          const ImportedGlobal g = import_global(text(syms_[module]), text(syms_[name]), "STACK_GLOBAL");
          stack_globals_.emplace(pair, g);
          push(g.sym);
        }
        break;
      }
      case 'i': {  // INST module\nname\n, arguments above MARK
        std::string module(reader_.line());
        std::string name(reader_.line());
        pop_mark();
        const uint32_t cls = import(std::move(module), std::move(name), "INST");
        push(call(cls, "INST"));
        break;
      }
      case 'o': {  // OBJ: MARK cls args...
        const std::vector<uint32_t>& items = pop_mark();
        if (items.empty()) fail("OBJ without a class");
        const uint32_t cls = items[0];
        push(call(cls, "OBJ"));
        break;
      }
      case 0x82:
      case 0x83:
      case 0x84: {  // EXT1/2/4: a global by its copyreg extension code
        const uint32_t code = op == 0x82 ? reader_.u8() : op == 0x83 ? reader_.u16() : reader_.u32();
        const char* name = op == 0x82 ? "EXT1" : op == 0x83 ? "EXT2" : "EXT4";
        push(import("copyreg._extension_registry", std::to_string(code), name));
        break;
      }
      case 'R': {
        const uint32_t args = pop(), fn = pop();
        (void)args;
        push(call(fn, "REDUCE"));
        break;
      }
      case 0x81: {
        const uint32_t args = pop(), cls = pop();
        (void)args;
        push(call(cls, "NEWOBJ"));
        break;
      }
      case 0x92: {
        pop();  // kwargs
        const uint32_t args = pop(), cls = pop();
        (void)args;
        push(call(cls, "NEWOBJ_EX"));
        break;
      }
      case 'b': {  // BUILD
        pop();
        const uint32_t target = top();
        const Symbol& t = syms_[target];
        if (t.kind == SymKind::Global) {
          anomaly("BUILD on the global " + text(t) + " sets attributes of a module or class");
          record_call(text(t) + ".__setstate__", false, "BUILD");
        } else if (t.kind == SymKind::Object) {
          method_call(target, "__setstate__", "BUILD");
        } else if (t.kind != SymKind::PersId) {
          anomaly("BUILD on a " + kind_word(t.kind));
        }
        break;
      }
      case 'P':  // PERSID: a text persistent id
        persistent_id(string(reader_.line()));
        break;
      case 'Q': persistent_id(pop()); break;
      case 'p': memo_put(static_cast<uint64_t>(text_int(reader_.line()))); break;
      case 'q': memo_put(reader_.u8()); break;
      case 'r': memo_put(reader_.u32()); break;
      case 0x94: memo_put(memo_size_); break;  // MEMOIZE: key len(memo)
      case 'g': memo_get(static_cast<uint64_t>(text_int(reader_.line()))); break;
      case 'h': memo_get(reader_.u8()); break;
      case 'j': memo_get(reader_.u32()); break;
      default: fail("opcode " + pickle_opcode_name(op) + " is not a pickle opcode");
    }
  }

  ByteReader reader_;
  size_t max_findings_;
  size_t text_budget_;  // text_bytes_ may reach this
  PickleScan out_;
  std::vector<Symbol> syms_;
  std::vector<std::string> texts_;       // Symbol::text
  std::vector<uint32_t> tuple_items_;    // Symbol::items_at
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::vector<uint32_t> marked_;  // pop_mark()'s result
  std::vector<uint32_t> dense_memo_;  // memo keys below kDenseMemoKeys; kNoMemo where none
  std::unordered_map<uint64_t, uint32_t> memo_;  // the other keys
  size_t memo_size_ = 0;  // keys stored, in both
  size_t values_ = 0;  // count_value()
  size_t text_bytes_ = 0;
  bool seen_[256] = {};
  bool truncated_ = false;
  std::unordered_map<std::string, size_t> import_index_;  // "module.name\nOPCODE" -> index in out_.imports
  std::unordered_map<std::string, std::vector<size_t>> calls_by_callable_;  // -> indices in out_.calls
  std::unordered_map<std::string, uint32_t> global_texts_;             // "module.name" -> its text
  std::unordered_map<uint64_t, ImportedGlobal> stack_globals_;  // STACK_GLOBAL's two texts -> the global
  size_t pid_text_bytes_ = 0;
  bool pids_truncated_ = false;
  size_t op_offset_ = 0;
  uint64_t frame_end_ = 0;  // where the last FRAME's bytes end
};

}  // namespace

PickleScan scan_pickle(std::string_view bytes, size_t offset, size_t max_findings) {
  if (offset > bytes.size()) {
    PickleScan s;
    s.error = "the pickle starts past the end of its data";
    return s;
  }
  return Scanner(bytes.substr(offset), max_findings).run();
}

std::string pickle_opcode_name(uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op);
      return hex;
    }
  }
}

}  // namespace tsarchive
