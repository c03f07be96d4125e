#include <catch2/catch.hpp>

#include "base/error.h"
#include "core/inspect/inspect.h"
#include "format/model.h"
#include "format/pickle.h"
#include "helpers.h"

using namespace tsarchive;
using namespace std::string_literals;

TEST_CASE("pickle: protocol 2 list of small ints") {
  // \x80\x02 ] q\x00 ( K\x01 K\x02 e .
  const std::string p = bytes({0x80, 2, ']', 'q', 0, '(', 'K', 1, 'K', 2, 'e', '.'});
  const PickleGraph g = parse_pickle(p, "test");
  const PickleNode& root = g.at(g.root());
  REQUIRE(root.kind == PickleKind::List);
  REQUIRE(g.items(root).size() == 2);
  CHECK(g.at(g.items(root)[0]).integer == 1);
  CHECK(g.at(g.items(root)[1]).integer == 2);
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

TEST_CASE("pickle: STACK_GLOBAL (protocol 4) takes module and name from two strings on the stack") {
  // pickle.dumps(collections.OrderedDict([('a', 1)]), protocol=4): FRAME, SHORT_BINUNICODE,
  // MEMOIZE, STACK_GLOBAL, EMPTY_TUPLE, REDUCE, SETITEM. A fuzz find: the STACK_GLOBAL check
  // once read the strings' text before the graph had its bytes, a null dereference.
  const std::string p =
      "\x80\x04\x95)\x00\x00\x00\x00\x00\x00\x00\x8c\x0b" "collections\x94\x8c\x0b" "OrderedDict\x94\x93\x94)R\x94"
      "\x8c\x01" "a\x94K\x01s."s;
  const PickleGraph g = parse_pickle(p, "test");
  CHECK(g.call_target(g.root()) == "collections.OrderedDict");
  REQUIRE(g.entries(g.at(g.root())).size() == 1);
  CHECK(*g.string_at(g.entries(g.at(g.root()))[0].first) == "a");
  // Anything but two strings is refused.
  const std::string ints = bytes({0x80, 4, 'K', 1, 'K', 2, 0x93, '.'});
  CHECK_THROWS_WITH(parse_pickle(ints, "data.pkl"), Catch::Contains("STACK_GLOBAL needs two strings"));
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
  // torch.load makes the same list: a value that holds itself is no nesting, and no problem.
  CHECK(model.problems.empty());
}

TEST_CASE("tensors: a TorchScript data.pkl that holds no module object is a problem, whatever it holds") {
  // testdata/hostile/pkl_self_cycle.pt: data.pkl is a list that contains itself, on which
  // torch.jit.load fails (Expected Object but got GenericList); the cycle itself is no problem.
  const InspectReport r = inspect_file(testdata("hostile/pkl_self_cycle.pt"));
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0] == "data.pkl holds no module object, which torch.jit.load needs");
}

TEST_CASE("pickle: values nested deeper than the bound stop the walk, and say so") {
  // 300 lists, each appended to the one before: 300 levels, no cycle.
  const std::string p = "\x80\x02"s + std::string(300, ']') + std::string(299, 'a') + ".";
  const PickleGraph g = parse_pickle(p, "test");
  ModelContents model;
  collect_saved_object(g, "data", model);
  REQUIRE(model.problems.size() == 1);
  CHECK_THAT(model.problems[0], Catch::Contains("nested deeper than 256 levels"));
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

namespace {
std::vector<int64_t> ints_of(const PickleGraph& g, PickleRef list) {
  std::vector<int64_t> out;
  for (PickleRef item : g.items(g.at(list))) out.push_back(g.at(item).integer);
  return out;
}
}  // namespace

TEST_CASE("pickle: APPENDs to lists that take turns keep each list's values in order") {
  // a = []; b = []; then a.append(i), b.append(100 + i) in turns, both in a tuple.
  std::string p = bytes({0x80, 2, ']', 'q', 0, ']', 'q', 1, '0', '0'});  // memo 0 = a, 1 = b
  for (int i = 0; i < 50; ++i) {
    p += bytes({'h', 0, 'K', i, 'a', '0'});        // a.append(i)
    p += bytes({'h', 1, 'K', 100 + i, 'a', '0'});  // b.append(100 + i)
  }
  p += bytes({'h', 0, 'h', 1, 0x86, '.'});
  const PickleGraph g = parse_pickle(p, "test");
  const auto pair = g.items(g.at(g.root()));
  REQUIRE(pair.size() == 2);
  std::vector<int64_t> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(i), b.push_back(100 + i);
  CHECK(ints_of(g, pair[0]) == a);
  CHECK(ints_of(g, pair[1]) == b);
}

TEST_CASE("pickle: SETITEMs, APPENDS and a nested container in between all land on the right node") {
  // d = {}; d['x'] = [1, 2]; d['y'] = 3  with SETITEM, then APPENDS onto the list via the memo.
  const std::string p = "\x80\x02}q\x00X\x01\x00\x00\x00x]q\x01(K\x01K\x02" "esX\x01\x00\x00\x00yK\x03s"
                        "h\x01(K\x04K\x05" "e0."s;
  const PickleGraph g = parse_pickle(p, "test");
  const PickleNode& d = g.at(g.root());
  REQUIRE(d.kind == PickleKind::Dict);
  const auto entries = g.entries(d);
  REQUIRE(entries.size() == 2);
  CHECK(*g.string_at(entries[0].first) == "x");
  CHECK(ints_of(g, entries[0].second) == std::vector<int64_t>{1, 2, 4, 5});
  CHECK(*g.string_at(entries[1].first) == "y");
  CHECK(g.at(entries[1].second).integer == 3);
}

TEST_CASE("pickle: MEMOIZE stores at len(memo), counting keys BINPUT stored") {
  // 'a' BINPUT 5, 'b' MEMOIZE (key 1: one key stored), then GET 1 -> 'b'.
  const std::string p = "\x80\x04\x8c\x01" "aq\x05" "0\x8c\x01" "b\x94" "0h\x01."s;
  const PickleGraph g = parse_pickle(p, "test");
  REQUIRE(g.string_at(g.root()).has_value());
  CHECK(*g.string_at(g.root()) == "b");
}

TEST_CASE("pickle: a graph keeps its text after the bytes it was parsed from are gone") {
  PickleGraph g;
  size_t end = 0;
  {
    std::string prefix(7, 'z');  // parsed from an offset, as the legacy format is
    const std::string p = prefix + "\x80\x02" "cmod\nname\nX\x05\x00\x00\x00hello\x86."s + "trailing";
    g = parse_pickle(std::string_view(p), "test", prefix.size(), &end);
    CHECK(end == p.size() - 8);
  }
  const auto pair = g.items(g.at(g.root()));
  REQUIRE(pair.size() == 2);
  CHECK(g.is_global(pair[0], "mod", "name"));
  CHECK(*g.string_at(pair[1]) == "hello");
  std::string owned = "\x80\x02X\x03\x00\x00\x00" "abc."s;
  const PickleGraph h = parse_pickle(std::move(owned), "test");
  CHECK(*h.string_at(h.root()) == "abc");
}

TEST_CASE("pickle: APPENDs that take turns between two lists cost linear time and memory") {
  // Each append moves to the other list; copying a whole list per append
  // would take ~10^10 steps here and time the test out.
  std::string p = bytes({0x80, 2, ']', 'q', 0, ']', 'q', 1, '0', '0'});
  constexpr int kTurns = 100'000;
  for (int i = 0; i < kTurns; ++i) p += bytes({'h', 0, 'N', 'a', '0', 'h', 1, 'N', 'a', '0'});
  p += bytes({'h', 0, '.'});
  const PickleGraph g = parse_pickle(p, "test");
  CHECK(g.items(g.at(g.root())).size() == kTurns);
}

TEST_CASE("pickle: the items of containers are bounded like values") {
  // One list and one None, DUPed 5000 times and APPENDed: two nodes, 5000
  // items. The items, not the nodes, are what grows.
  const std::string p = "\x80\x02](N"s + std::string(5000, '2') + "e.";
  PickleLimits limits;
  limits.max_nodes = 1000;
  CHECK_THROWS_WITH(parse_pickle(p, "data.pkl", 0, nullptr, limits), Catch::Contains("values in all"));
  const PickleGraph g = parse_pickle(p, "data.pkl");
  CHECK(g.size() == 2);
  CHECK(g.items(g.at(g.root())).size() == 5001);
}

namespace {
std::map<std::string, std::vector<int64_t>> shapes_of(const InspectReport& r) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const TensorInfo& t : r.tensors) out[t.path] = t.shape;
  return out;
}
}  // namespace

TEST_CASE("tensors: an OrderedDict or dict built from [key, value] pairs lists its tensors by key") {
  // scripts/make_testdata_pickle_shapes.py: OrderedDict([[key, tensor], ...]) by REDUCE, as Python 2
  // pickled one (lpips 0.1.4's legacy weights), and dict([(key, tensor), ...]).
  const InspectReport od = inspect_file(testdata("pickle_shapes/ordereddict_pairs.pth"));
  CHECK(od.problems.empty());
  CHECK(shapes_of(od) == std::map<std::string, std::vector<int64_t>>{{"lin0.model.1.weight", {1, 4, 1, 1}},
                                                                     {"lin1.model.1.weight", {1, 2, 1, 1}}});
  const InspectReport d = inspect_file(testdata("pickle_shapes/dict_pairs.pt"));
  CHECK(d.problems.empty());
  CHECK(shapes_of(d) == std::map<std::string, std::vector<int64_t>>{{"w", {2, 3}}, {"b", {3}}});
}

TEST_CASE("tensors: a config whose nodes refer back to their parent does not hide the tensors after it") {
  // scripts/make_testdata_pickle_shapes.py: an OmegaConf-like config (each node's _parent is a memo
  // reference to the node that holds it) saved before the weights.
  const InspectReport r = inspect_file(testdata("pickle_shapes/config_cycle.pt"));
  INFO((r.problems.empty() ? std::string() : r.problems.front()));
  CHECK(r.problems.empty());
  CHECK(shapes_of(r) == std::map<std::string, std::vector<int64_t>>{{"model.w", {3, 4}}, {"model.b", {4}}});
}

TEST_CASE("tensors: a cycle through the memo costs one visit; shared values are still listed on each path") {
  // d = {}; d['self'] = d; t = tensor; d['a'] = t; d['b'] = t (tied weights)
  const std::string tensor =
      "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage"
      "ctorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x02tQK\x00K\x02\x85K\x01\x85"
      "\x89" "ccollections\nOrderedDict\n)RtR"s;
  const std::string p = "\x80\x02}q\x00(X\x04\x00\x00\x00selfh\x00X\x01\x00\x00\x00" "a"s + tensor +
                        "q\x01X\x01\x00\x00\x00" "bh\x01u."s;
  const PickleGraph g = parse_pickle(p, "test");
  ModelContents model;
  collect_saved_object(g, "data", model);
  CHECK(model.problems.empty());
  REQUIRE(model.tensors.size() == 2);
  CHECK(model.tensors[0].path == "a");
  CHECK(model.tensors[1].path == "b");
}

TEST_CASE("tensors: paths to a memo-shared tensor are bounded in text, by the pickle's size") {
  // testdata/hostile/pkl_memo_long_paths.pt (16 KiB): one tensor under 40 dicts that each hold the
  // one below under two 100-byte keys: 2**40 paths, each 4 KiB. Listing them all took 10 GB.
  const InspectReport r = inspect_file(testdata("hostile/pkl_memo_long_paths.pt"));
  uint64_t text = 0;
  for (const TensorInfo& t : r.tensors) text += t.path.size();
  CHECK(text < (4u << 20));
  CHECK(r.tensors.size() > 100);  // the first paths are listed, as for tied weights
  bool said = false;
  for (const std::string& p : r.problems) said = said || p.find("paths run past") != std::string::npos;
  CHECK(said);
}

namespace {
bool notes_unreached(const InspectReport& r) {
  for (const std::string& n : r.notes) {
    if (n.find("no tensor of the pickles reaches") != std::string::npos) return true;
  }
  return false;
}
std::map<std::string, std::string> dtypes_of(const InspectReport& r) {
  std::map<std::string, std::string> out;
  for (const TensorInfo& t : r.tensors) out[t.path] = t.dtype;
  return out;
}
}  // namespace

TEST_CASE("tensors: those built inside another call's arguments are listed (GraphModule, subclasses, sparse, meta)") {
  // scripts/make_testdata_pickle_shapes.py (review 55c). torch.save of an fx GraphModule: its parameters
  // are in the body dict of reduce_graph_module(body, import_block). PyTorch builds 7 tensors.
  const InspectReport fx = inspect_file(testdata("pickle_shapes/fx_graph_module_2_13.pt"));
  INFO((fx.problems.empty() ? std::string() : fx.problems.front()));
  CHECK(fx.problems.empty());
  CHECK_FALSE(notes_unreached(fx));
  CHECK(shapes_of(fx) == std::map<std::string, std::vector<int64_t>>{
                             {"_modules.c._parameters.weight", {3, 4}},
                             {"_modules.c._parameters.bias", {3}},
                             {"_modules.bn._parameters.weight", {3}},
                             {"_modules.bn._parameters.bias", {3}},
                             {"_modules.bn._buffers.running_mean", {3}},
                             {"_modules.bn._buffers.running_var", {3}},
                             {"_modules.bn._buffers.num_batches_tracked", {}}});
  // A tensor and a Parameter with Python attributes, and a subclass: _rebuild_from_type_v2(func, type, args, state).
  const InspectReport attrs = inspect_file(testdata("pickle_shapes/tensor_attrs_2_13.pt"));
  CHECK(attrs.problems.empty());
  CHECK_FALSE(notes_unreached(attrs));
  CHECK(shapes_of(attrs) ==
        std::map<std::string, std::vector<int64_t>>{{"t", {2}}, {"p", {3}}, {"plain", {2, 2}}, {"sub", {4}}});
  // Sparse COO and CSR: their dense parts, named by PyTorch's accessors; a meta tensor has no storage.
  const InspectReport sparse = inspect_file(testdata("pickle_shapes/sparse_meta_2_13.pt"));
  INFO((sparse.problems.empty() ? std::string() : sparse.problems.front()));
  CHECK(sparse.problems.empty());
  CHECK_FALSE(notes_unreached(sparse));
  CHECK(shapes_of(sparse) == std::map<std::string, std::vector<int64_t>>{{"coo.indices", {2, 3}},
                                                                         {"coo.values", {3}},
                                                                         {"csr.crow_indices", {4}},
                                                                         {"csr.col_indices", {3}},
                                                                         {"csr.values", {3}},
                                                                         {"meta", {5}},
                                                                         {"dense", {2}}});
  for (const TensorInfo& t : sparse.tensors) {
    if (t.path == "meta") CHECK((t.device == "meta" && t.dtype == "float32" && t.storage_record.empty()));
  }
}

TEST_CASE("tensors: every dtype torch.save of PyTorch 2.13 writes has its name and element size") {
  // dtypes_2_13.pt: {dtype name: a tensor of 3 (4 for quint4x2/quint2x4) of that dtype}.
  const InspectReport r = inspect_file(testdata("pickle_shapes/dtypes_2_13.pt"));
  const std::map<std::string, uint64_t> sizes = {
      {"uint16", 2}, {"uint32", 4}, {"uint64", 8}, {"float8_e4m3fnuz", 1}, {"float8_e5m2fnuz", 1},
      {"float8_e8m0fnu", 1}, {"float4_e2m1fn_x2", 1}, {"bits16", 2}, {"bits8", 1}, {"complex32", 4}};
  const std::map<std::string, std::string> dtypes = dtypes_of(r);
  CHECK(dtypes.size() == 32);
  for (const auto& [path, dtype] : dtypes) CHECK(path == dtype);
  for (const TensorInfo& t : r.tensors) {
    const auto it = sizes.find(t.path);
    if (it != sizes.end()) CHECK(t.nbytes == 3 * it->second);
  }
  // A dtype this reader does not know is said, not read as the storage's bytes.
  using namespace std::string_literals;
  const std::string p = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v3\n((X\x07\x00\x00\x00storage"
                        "ctorch.storage\nUntypedStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x00K\x03\x85"
                        "K\x01\x85\x89" "ccollections\nOrderedDict\n)Rctorch\nuint99\ntR."s;
  ModelContents model;
  collect_saved_object(parse_pickle(p, "test"), "data", model);
  CHECK(model.tensors.empty());
  REQUIRE(model.problems.size() == 1);
  CHECK_THAT(model.problems.front(), Catch::Contains("torch.uint99"));
}
