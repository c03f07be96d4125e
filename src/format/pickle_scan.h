// What unpickling a pickle would import and call, found without unpickling it.
//
// The safe reader (pickle.h) builds values and refuses what a model file never
// holds; this scanner instead plays every opcode of protocols 0-5 on a stack
// of symbols, the way pickle.Unpickler would, so that it can say what a
// hostile pickle would do to the loader that trusts it:
//   imports   GLOBAL, STACK_GLOBAL (its two strings wherever they came from:
//             literals, the memo, DUP), INST and EXT1/2/4 (the copyreg
//             extension registry: a code, not a name)
//   calls     REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ: the callable, which is a
//             global or the result of an earlier call (getattr chains);
//             BUILD on an object (its __setstate__), APPEND/APPENDS on a
//             non-list and SETITEM/SETITEMS on a non-dict (its methods)
//   persistent ids   PERSID and BINPERSID: the id's shape
// Strings are the texts the unpickler makes: protocol 0's UNICODE and STRING
// decoded as CPython decodes them (decode_pickle_unicode, pickle.h), so that a
// STACK_GLOBAL's name and a storage key are the ones the loader uses.
// The memo is followed exactly: PUT/BINPUT/LONG_BINPUT/MEMOIZE store the
// symbol on top, GET/BINGET/LONG_BINGET push that same symbol, and a key never
// stored ends the scan as the unpickler would fail.
//
// Anomalies are what no pickler writes: SETITEM(S) on something that is not a
// dict, APPEND(S) on something that is not a list, an opcode byte no protocol
// defines, a pickle that ends before STOP.
//
// Safety: each opcode reads its operands through ByteReader (bounds-checked),
// pushes at most one symbol, and symbols keep at most kMaxTupleItems items;
// memory is linear in the input (the memo's dense keys add at most 4 MiB)
// and the scan never throws for content (a
// malformed pickle is a result, `complete` false, with the reason).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tsarchive {

struct PickleImport {
  std::string module;
  std::string name;
  std::string opcode;   // "GLOBAL", "STACK_GLOBAL", "INST", "EXT1"...
  uint64_t offset = 0;  // of the first such opcode, from the pickle's first byte
  uint64_t count = 1;   // how many times the pickle imports it so
  std::string full() const { return module + "." + name; }
};

struct PickleInvoke {
  std::string callable;  // "posix.system", "collections.OrderedDict", or "<result of builtins.getattr>"
  bool callable_is_global = false;
  std::string opcode;    // "REDUCE", "NEWOBJ", "BUILD", "SETITEM"...
  uint64_t offset = 0;   // of the first such call
  uint64_t count = 1;    // how many times the pickle makes it
};

// A persistent id as the pickle states it.
struct PicklePersistentId {
  uint64_t offset = 0;
  bool tuple = false;       // a tuple (BINPERSID of a tuple)
  size_t size = 0;          // its items
  std::string first;        // its first item when a string ("storage", "module")
  std::string storage_type; // its second item when a global ("torch.FloatStorage")
  std::string key;          // its third item when a string ("0")
  int64_t numel = -1;       // its fifth item when an int
};

struct PickleScan {
  bool complete = false;      // reached STOP with one value on the stack
  std::string error;          // why not, with the offset
  bool ran_out = false;       // not complete because the bytes ended (more bytes might complete it)
  uint64_t end = 0;           // offset just past STOP (or where the scan ended)
  int protocol = -1;          // PROTO's operand; -1 when absent
  std::vector<PickleImport> imports;
  std::vector<PickleInvoke> calls;
  std::vector<PicklePersistentId> persistent_ids;
  std::vector<std::string> anomalies;  // with offsets
  std::vector<uint8_t> opcodes;        // the distinct opcodes used, in first-use order
  std::vector<uint64_t> opcode_offsets;  // the offset of each one's first use
};

// Scans one pickle starting at `offset` of `bytes`; offsets in the result
// count from `offset`. Imports are listed once per global and opcode, calls
// once per callable and opcode, each with the first offset and a count.
// Stops listing after `max_findings` of them (an anomaly says so; real files
// have a few dozen).
PickleScan scan_pickle(std::string_view bytes, size_t offset = 0, size_t max_findings = 4096);

// The opcode's name as pickletools spells it ("STACK_GLOBAL"), or "0xNN".
std::string pickle_opcode_name(uint8_t op);

}  // namespace tsarchive
