// A pickle reader that never executes anything.
//
// PyTorch writes data.pkl, constants.pkl and bytecode.pkl with protocol 2
// (torch/csrc/jit/serialization/pickler.cpp), and Python's torch.save with
// protocol 2 by default. We accept the data-only opcodes of protocols 0-5:
//   PROTO FRAME STOP MARK POP POP_MARK DUP  NONE NEWTRUE NEWFALSE
//   BININT BININT1 BININT2 LONG1 LONG4 INT LONG  BINFLOAT FLOAT
//   BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINSTRING SHORT_BINSTRING
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
#include <string>
#include <string_view>
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

struct PickleNode {
  PickleKind kind = PickleKind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::string text2;
  PickleRef a = kNoPickleRef;
  PickleRef b = kNoPickleRef;
  PickleRef state = kNoPickleRef;  // set by BUILD
  std::vector<PickleRef> items;    // tuple/list/set elements, APPENDs on any node
  std::vector<std::pair<PickleRef, PickleRef>> entries;  // dict items, SETITEMs on any node
};

class PickleGraph {
 public:
  const PickleNode& at(PickleRef ref) const { return nodes_.at(ref); }
  PickleRef root() const { return root_; }
  size_t size() const { return nodes_.size(); }

  // Convenience accessors that return null/empty when the node is not of that kind.
  const std::string* string_at(PickleRef ref) const;
  bool is_global(PickleRef ref, std::string_view module, std::string_view name) const;
  // For a Call node: its callable if it is a Global, as "module.name"; "" otherwise.
  std::string call_target(PickleRef ref) const;
  // Tuple elements of a Call's argument tuple (empty when not a tuple).
  const std::vector<PickleRef>& call_args(PickleRef ref) const;

 private:
  friend class PickleParser;
  std::vector<PickleNode> nodes_;
  PickleRef root_ = kNoPickleRef;
};

struct PickleLimits {
  // One value can cost one byte of pickle (EMPTY_LIST) and ~160 bytes here:
  // 4 million is ~650 MB at most, and ~200,000 tensors of a torch.save file.
  size_t max_nodes = 4'000'000;
};

// Parses one pickle starting at `offset` of `bytes`; on return `*end` (if given)
// is the offset just past STOP. Throws Error(BadInput) with `what` and the
// offset of the failing opcode.
PickleGraph parse_pickle(std::string_view bytes, const std::string& what, size_t offset = 0, size_t* end = nullptr,
                         const PickleLimits& limits = {});

}  // namespace tsarchive
