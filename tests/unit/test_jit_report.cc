// The JIT commands' libtorch-free parts: what makes trace/convert refuse to
// write, the DOT drawing of a graph given as plain data, and the operator
// list as the YAML a selective build reads.
#include <catch2/catch.hpp>

#include <sstream>

#include "cli/report_jit.h"
#include "contract/jit.h"

using namespace tsarchive;
using namespace tsarchive::cli;

namespace {

OutputCheck check(const std::string& path, bool passed) {
  OutputCheck c;
  c.path = path;
  c.passed = passed;
  c.elements = 4;
  c.mismatched = passed ? 0 : 1;
  return c;
}

// graph(%self, %x): %c = prim::Constant[value="a\"b"]; %y = prim::If(%x) { block0: -> (%x) }; return (%y)
MethodGraph if_graph() {
  MethodGraph g;
  g.method = "forward";
  g.schema = "forward(Tensor x) -> Tensor";
  g.values = {{"%self", "M"}, {"%x", "Tensor"}, {"%c", "str"}, {"%y", "Tensor"}};
  g.nodes = {
      {"prim::Param", "", "", {}, {0, 1}, -1, 0},
      {"prim::Constant", "a\"b", "", {}, {2}, -1, 0},
      {"prim::If", "", "code/m.py:3", {1, 1}, {3}, -1, 0},
      {"prim::Param", "", "", {}, {}, 2, 0},
      {"prim::Return", "", "", {1}, {}, 2, 0},
      {"prim::Return", "", "", {3}, {}, -1, 0},
  };
  return g;
}

}  // namespace

TEST_CASE("trace and convert write only when every output matches, and with --strict no warning") {
  ConvertReport r;
  r.checks = {check("out[0]", true), check("out[1]", false)};
  CHECK(convert_failure(r, false).rfind("out[1] of the written archive differs", 0) == 0);
  r.checks = {check("out", true)};
  CHECK(convert_failure(r, false).empty());
  r.warnings = {TraceWarning{"fresh-inputs", "the trace differs"}};
  CHECK(convert_failure(r, false).empty());
  CHECK(convert_failure(r, true) == "--strict: the trace differs");
}

TEST_CASE("convert JSON names its schema, steps and what was written") {
  ConvertReport r;
  r.steps = {"eval", "freeze", "save TorchScript (.pt)"};
  ConvertOutcome o;
  o.command = "convert";
  o.file = "in.pt";
  o.output = "out.pt";
  o.written = true;
  o.size = 1234;
  const auto doc = convert_to_json(r, o);
  CHECK(doc["schema"] == "tsarchive.convert/1");
  CHECK(doc["written"] == true);
  CHECK(doc["size"] == 1234);
  CHECK(doc["steps"].size() == 3);
  CHECK(steps_text(r.steps) == "eval > freeze > save TorchScript (.pt)");
  o.command = "trace";
  o.written = false;
  o.failure = "out differs";
  const auto failed = convert_to_json(r, o);
  CHECK(failed["schema"] == "tsarchive.trace/1");
  CHECK(failed["passed"] == false);
  CHECK(!failed.contains("size"));
}

TEST_CASE("DOT: blocks nest as clusters, labels are escaped, one edge per value") {
  std::ostringstream out;
  render_graph_dot(if_graph(), out);
  const std::string dot = out.str();
  CHECK(dot.rfind("digraph \"forward\" {\n", 0) == 0);
  CHECK(dot.find("subgraph cluster_2_0 {") != std::string::npos);
  CHECK(dot.find("prim::Constant\\na\\\"b") != std::string::npos);  // the quote escaped
  CHECK(dot.find("n2 -> n3 [style=dotted];") != std::string::npos);   // the If to its block
  // %x reaches the If twice but is drawn once.
  size_t edges = 0;
  for (size_t at = dot.find("n0 -> n2 "); at != std::string::npos; at = dot.find("n0 -> n2 ", at + 1)) ++edges;
  CHECK(edges == 1);
  CHECK(dot.find("n2 -> n5") != std::string::npos);  // %y to the return
  CHECK(dot.substr(dot.size() - 2) == "}\n");
  CHECK(graph_to_json(if_graph(), "m.pt")["nodes"] == 2);  // the constant and the If, not params and returns
}

TEST_CASE("inspect --ops: a YAML list under comments, and JSON") {
  OpsReport ops;
  ops.operators = {"aten::add.Tensor", "aten::conv2d"};
  ops.source = "export_opnames";
  std::ostringstream out;
  render_ops_yaml(ops, "m.pt", out);
  const std::string yaml = out.str();
  CHECK(yaml.rfind("# Root operators of m.pt (export_opnames), 2 operators,\n", 0) == 0);
  CHECK(yaml.find("\n- aten::add.Tensor\n- aten::conv2d\n") != std::string::npos);
  const auto doc = ops_to_json(ops, "m.pt");
  CHECK(doc["schema"] == "tsarchive.ops/1");
  CHECK(doc["operators"][1] == "aten::conv2d");
}
