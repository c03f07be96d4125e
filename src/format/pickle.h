// A pickle reader that never executes anything.
//
// PyTorch writes data.pkl, constants.pkl and bytecode.pkl with protocol 2
// (torch/csrc/jit/serialization/pickler.cpp), and Python's torch.save with
// protocol 2 by default. We accept the data-only opcodes of protocols 0-5:
//   PROTO FRAME STOP MARK POP POP_MARK DUP  NONE NEWTRUE NEWFALSE
//   BININT BININT1 BININT2 LONG1 LONG4 INT LONG  BINFLOAT FLOAT
//   BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINSTRING SHORT_BINSTRING
//   UNICODE STRING (protocol 0's text, decoded as CPython does: below)
//   BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8
//   EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3  EMPTY_LIST APPEND APPENDS LIST
//   EMPTY_DICT SETITEM SETITEMS DICT  EMPTY_SET ADDITEMS FROZENSET
//   GLOBAL STACK_GLOBAL REDUCE BUILD NEWOBJ NEWOBJ_EX  BINPERSID
//   BINPUT LONG_BINPUT PUT BINGET LONG_BINGET GET MEMOIZE
// GLOBAL, REDUCE, NEWOBJ, BUILD and BINPERSID are *recorded* as nodes (which
// callable, which arguments, which state), never resolved or called.
// Rejected: INST, OBJ, EXT1/2/4, PERSID (text), NEXT_BUFFER, READONLY_BUFFER,
// and anything unknown.
//
// Safety: every length is checked against the bytes that remain; each opcode
// adds at most one node, so memory is linear in the input; values refer to each
// other by index into one arena, so memo tricks can share nodes and even make
// cycles without making memory explode — walkers must bound their depth.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tsarchive {

enum class PickleKind : uint8_t {
  None,
  Bool,
  Int,
  BigInt,  // LONG1/LONG4 wider than 64 bits; text holds the little-endian bytes
  Float,
  String,  // text (unicode)
  Bytes,
  Tuple,
  List,
  Dict,
  Set,
  Global,        // text = "module", text2 = "name"
  Call,          // REDUCE / NEWOBJ: a = callable, b = args tuple
  PersistentId,  // a = the pid value
};

using PickleRef = uint32_t;
constexpr PickleRef kNoPickleRef = 0xFFFFFFFFu;
using PickleEntry = std::pair<PickleRef, PickleRef>;  // key, value

// A run of a graph's pool: the items or the entries of one node.
// (Plain, so that it can share a union with the numbers.)
struct PickleSlice {
  uint32_t begin;
  uint32_t size;
};

// A read-only view of a run of values (std::span is C++20).
template <typename T>
class PickleSpan {
 public:
  PickleSpan() = default;
  PickleSpan(const T* data, size_t size) : data_(data), size_(size) {}
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

// One value, in 48 bytes on purpose: a 130 KB data.pkl makes some 30,000 of
// them, and each 4 KiB of fresh memory costs a page fault. Text is a run of
// the graph's own copy of the pickle, items and entries runs of its pools:
// read them through PickleGraph::text, text2, items and entries.
struct PickleNode {
  PickleKind kind = PickleKind::None;
  bool boolean = false;
  PickleRef a = kNoPickleRef;
  PickleRef b = kNoPickleRef;
  PickleRef state = kNoPickleRef;  // set by BUILD
  union {
    int64_t integer = 0;  // Int
    double real;          // Float
    PickleSlice text;     // String, Bytes, BigInt; Global: the module
  };
  PickleSlice text2{};    // Global: the name
  PickleSlice items{};    // tuple/list/set elements, APPENDs on any node
  PickleSlice entries{};  // dict items, SETITEMs on any node
};

class PickleGraph {
 public:
  const PickleNode& at(PickleRef ref) const { return nodes_.at(ref); }
  PickleRef root() const { return root_; }
  size_t size() const { return nodes_.size(); }

  // The text of a String, Bytes or BigInt node, or a Global's module; "" for other kinds.
  std::string_view text(const PickleNode& n) const { return has_text(n) ? slice(n.text) : std::string_view(); }
  // A Global's name; "" for other kinds.
  std::string_view text2(const PickleNode& n) const {
    return n.kind == PickleKind::Global ? slice(n.text2) : std::string_view();
  }
  PickleSpan<PickleRef> items(const PickleNode& n) const { return {item_pool_.data() + n.items.begin, n.items.size}; }
  PickleSpan<PickleEntry> entries(const PickleNode& n) const {
    return {entry_pool_.data() + n.entries.begin, n.entries.size};
  }

  // Convenience accessors that return null/empty when the node is not of that kind.
  std::optional<std::string_view> string_at(PickleRef ref) const;
  bool is_global(PickleRef ref, std::string_view module, std::string_view name) const;
  // For a Call node: whether its callable is the Global module.name.
  bool calls(PickleRef ref, std::string_view module, std::string_view name) const;
  // For a Call node: the Global it calls; null when it calls anything else.
  const PickleNode* callable(PickleRef ref) const;
  // A Global as "module.name"; "" for other kinds.
  std::string global_name(const PickleNode& n) const;
  // For a Call node: its callable if it is a Global, as "module.name"; "" otherwise.
  std::string call_target(PickleRef ref) const;
  // Tuple elements of a Call's argument tuple (empty when not a tuple).
  PickleSpan<PickleRef> call_args(PickleRef ref) const;

 private:
  friend class PickleParser;
  static bool has_text(const PickleNode& n) {
    return n.kind == PickleKind::String || n.kind == PickleKind::Bytes || n.kind == PickleKind::BigInt ||
           n.kind == PickleKind::Global;
  }
  // A run with this bit set is of decoded_, not of the pickle (a pickle is
  // under 2 GiB: ReadLimits::kPickle).
  static constexpr uint32_t kDecodedRun = 0x80000000u;
  std::string_view slice(PickleSlice s) const {
    if (s.begin & kDecodedRun) return std::string_view(decoded_).substr(s.begin & ~kDecodedRun, s.size);
    return text_.substr(s.begin, s.size);
  }

  std::shared_ptr<const std::string> bytes_;  // the pickle, from its first opcode to STOP
  // What text runs index: the parser's input while it parses (so text reads
  // work then too), bytes_ once parse_pickle returns.
  std::string_view text_;
  // Texts that are not runs of the pickle: protocol 0's UNICODE and STRING
  // operands as the unpickler decodes them.
  std::string decoded_;
  std::vector<PickleNode> nodes_;
  std::vector<PickleRef> item_pool_;
  std::vector<PickleEntry> entry_pool_;
  PickleRef root_ = kNoPickleRef;
};

struct PickleLimits {
  // One value can cost one byte of pickle (EMPTY_LIST) and 48 bytes here:
  // 4 million is ~200 MB at most, and ~200,000 tensors of a torch.save file.
  size_t max_nodes = 4'000'000;
};

// Parses one pickle starting at `offset` of `bytes`; on return `*end` (if given)
// is the offset just past STOP. Throws Error(BadInput) with `what` and the
// offset of the failing opcode. The graph keeps its own copy of the pickle's
// bytes (only those from `offset` to STOP); given a std::string to own, it
// keeps that instead of copying.
PickleGraph parse_pickle(std::string_view bytes, const std::string& what, size_t offset = 0, size_t* end = nullptr,
                         const PickleLimits& limits = {});
PickleGraph parse_pickle(std::string&& bytes, const std::string& what, size_t offset = 0, size_t* end = nullptr,
                         const PickleLimits& limits = {});

// Protocol 0's text operands (the bytes between the opcode and its '\n') as
// the text CPython's unpickler makes of them, in UTF-8; nullopt, with why in
// `why`, when the unpickler fails on the operand, or makes a text that no
// UTF-8 name holds (a lone surrogate), or when CPython versions could read it
// differently: a reader that guessed would judge another name or storage key
// than the loader uses.
//   UNICODE ('V'): raw-unicode-escape: every byte is the code point of its
//     value (Latin-1: bytes c3 a9 are "\u00c3\u00a9", not "\u00e9"), except
//     \uXXXX and \UXXXXXXXX (after an odd number of backslashes).
//   STRING ('S'): quoted with ' or ", then codecs.escape_decode, then the
//     unpickler's encoding: 'utf-8', which torch.load passes (pickle.load's
//     'ASCII' fails on other bytes, so it never reads another text).
std::optional<std::string> decode_pickle_unicode(std::string_view operand, std::string* why);
std::optional<std::string> decode_pickle_string(std::string_view operand, std::string* why);

}  // namespace tsarchive
