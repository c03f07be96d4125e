#include <catch2/catch.hpp>

#include "base/error.h"
#include "format/model.h"
#include "format/pickle.h"

using namespace tsarchive;
using namespace std::string_literals;

namespace {
std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s += static_cast<char>(c);
  return s;
}
}  // namespace

TEST_CASE("pickle: protocol 2 list of small ints") {
  // \x80\x02 ] q\x00 ( K\x01 K\x02 e .
  const std::string p = bytes({0x80, 2, ']', 'q', 0, '(', 'K', 1, 'K', 2, 'e', '.'});
  const PickleGraph g = parse_pickle(p, "test");
  const PickleNode& root = g.at(g.root());
  REQUIRE(root.kind == PickleKind::List);
  REQUIRE(root.items.size() == 2);
  CHECK(g.at(root.items[0]).integer == 1);
  CHECK(g.at(root.items[1]).integer == 2);
}

TEST_CASE("pickle: LONG1 is little-endian two's complement") {
  const std::string p = bytes({0x80, 2, 0x8a, 2, 0x00, 0xff, '.'});  // -256
  const PickleGraph g = parse_pickle(p, "test");
  CHECK(g.at(g.root()).integer == -256);
}

TEST_CASE("pickle: GLOBAL and REDUCE are recorded, never called") {
  // GLOBAL os.system, MARK, BINUNICODE 'echo', TUPLE, REDUCE, STOP
  const std::string p = "\x80\x02" "cos\nsystem\n(X\x04\x00\x00\x00" "echot" "R."s;
  const PickleGraph g = parse_pickle(p, "test");
  CHECK(g.call_target(g.root()) == "os.system");
  REQUIRE(g.call_args(g.root()).size() == 1);
  CHECK(*g.string_at(g.call_args(g.root())[0]) == "echo");
}

TEST_CASE("pickle: a string longer than the data is refused") {
  const std::string p = bytes({0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f, 'a', 'b', '.'});
  CHECK_THROWS_WITH(parse_pickle(p, "data.pkl"), Catch::Contains("runs past the end"));
}

TEST_CASE("pickle: truncated input is refused") {
  const std::string p = bytes({0x80, 2, ']', 'q', 0, '(', 'K', 1});
  CHECK_THROWS_AS(parse_pickle(p, "data.pkl"), Error);
}

TEST_CASE("pickle: unknown opcodes are refused with their value") {
  const std::string p = bytes({0x80, 2, 'i', '.'});  // INST is not supported
  CHECK_THROWS_WITH(parse_pickle(p, "data.pkl"), Catch::Contains("unsupported pickle opcode 0x69"));
}

TEST_CASE("pickle: a memo key never stored is refused") {
  const std::string p = bytes({0x80, 2, 'h', 7, '.'});
  CHECK_THROWS_WITH(parse_pickle(p, "data.pkl"), Catch::Contains("memo key 7"));
}

TEST_CASE("pickle: STOP must leave exactly one value") {
  CHECK_THROWS_WITH(parse_pickle(bytes({0x80, 2, '.'}), "x"), Catch::Contains("expected 1"));
  CHECK_THROWS_WITH(parse_pickle(bytes({0x80, 2, 'N', 'N', '.'}), "x"), Catch::Contains("expected 1"));
}

TEST_CASE("pickle: pops below a MARK are refused") {
  CHECK_THROWS_WITH(parse_pickle(bytes({0x80, 2, 'N', '(', 'a', '.'}), "x"), Catch::Contains("empty stack"));
}

TEST_CASE("pickle: a list that contains itself is walked without looping") {
  // ] q\x00 h\x00 a h\x00 a .  -> l = []; l.append(l); l.append(l)
  const std::string p = bytes({0x80, 2, ']', 'q', 0, 'h', 0, 'a', 'h', 0, 'a', '.'});
  const PickleGraph g = parse_pickle(p, "test");
  ModelContents model;
  collect_saved_object(g, "data", model);  // must terminate
  CHECK(model.tensors.empty());
  CHECK_FALSE(model.problems.empty());  // it says it stopped, and why
}

TEST_CASE("pickle: memo sharing cannot blow up the walk") {
  // A chain of 40 tuples each holding the previous one twice: 2^40 paths.
  std::string p = bytes({0x80, 2, 'N'});
  for (int i = 0; i < 40; ++i) p += bytes({'2', 0x86});  // DUP, TUPLE2
  p += '.';
  const PickleGraph g = parse_pickle(p, "test");
  ModelContents model;
  collect_saved_object(g, "data", model);
  REQUIRE_FALSE(model.problems.empty());
  CHECK_THAT(model.problems.front(), Catch::Contains("stopped reading tensors"));
}

TEST_CASE("pickle: a flood of one-byte values stops at the cap, so memory stays bounded") {
  // EMPTY_LIST is one byte and one node: a pickle of N bytes costs N nodes.
  // testdata/hostile/pkl_node_flood.pt (27 KB) holds 20 million of them; with
  // the old cap of 50 million, inspect used 5 GB on it.
  CHECK(PickleLimits{}.max_nodes * sizeof(PickleNode) < (size_t{1} << 30));
  const std::string flood = "\x80\x02]("s + std::string(5000, ']') + "e.";
  PickleLimits limits;
  limits.max_nodes = 1000;
  CHECK_THROWS_WITH(parse_pickle(flood, "data.pkl", 0, nullptr, limits), Catch::Contains("more than 1000 values"));
  CHECK(parse_pickle(flood, "data.pkl").size() == 5001);  // the outer list and its 5000
}

TEST_CASE("tensors: a tensor that reaches past its storage is reported") {
  // _rebuild_tensor_v2(('storage', FloatStorage, '0', 'cpu', 2), 0, (4,), (1,), False, OrderedDict())
  std::string p = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage"
                  "ctorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x02tQK\x00K\x04\x85K\x01\x85"
                  "\x89" "ccollections\nOrderedDict\n)RtR."s;
  const PickleGraph g = parse_pickle(p, "test");
  ModelContents model;
  collect_saved_object(g, "data", model);
  REQUIRE(model.tensors.size() == 1);
  CHECK(model.tensors[0].shape == std::vector<int64_t>{4});
  CHECK(model.tensors[0].dtype == "float32");
  CHECK(model.tensors[0].storage_record == "data/0");
  REQUIRE(model.problems.size() == 1);
  CHECK_THAT(model.problems[0], Catch::Contains("reaches element 3") && Catch::Contains("holds 2"));
}
