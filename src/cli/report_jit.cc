#include "cli/report_jit.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "cli/output.h"
#include "cli/report_run.h"

namespace tsarchive::cli {
namespace {

// A DOT string literal's contents: quotes and backslashes escaped, line
// breaks as DOT's centred \n.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string node_label(const MethodGraph& g, const GraphNode& n) {
  const auto names = [&](const std::vector<int>& ids) {
    std::string s;
    for (int id : ids) s += (s.empty() ? "" : ", ") + g.values[static_cast<size_t>(id)].name;
    return s;
  };
  if (n.kind == "prim::Param") return n.parent < 0 ? "inputs\n" + names(n.outputs) : "block inputs\n" + names(n.outputs);
  if (n.kind == "prim::Return") return n.parent < 0 ? "return" : "block return";
  std::string label = n.kind;
  if (!n.detail.empty()) label += "\n" + n.detail;
  return label;
}

}  // namespace

void render_convert_text(const ConvertReport& r, const ConvertOutcome& o, std::ostream& out) {
  out << printable(o.file) << " -> " << printable(o.output) << ": " << printable(r.schema) << '\n';
  out << "  steps       " << steps_text(r.steps) << '\n';
  out << "  graph       " << with_commas(r.nodes_before) << " -> " << with_commas(r.nodes_after)
      << " nodes (inlined)\n";
  out << "  reloaded    with " << r.reloaded_with << ", libtorch " << r.libtorch_version << '\n';
  render_values("Check inputs", r.inputs, out);
  if (!r.checks.empty()) {
    out << "\nThe written archive against the original, on the check inputs\n";
    TextTable table({"output", "result", "tolerance", "detail"});
    for (const OutputCheck& c : r.checks) {
      table.add_row({c.path, c.passed ? "ok" : "MISMATCH", tolerance_text(c.tolerance), check_text(c)});
    }
    table.print(out);
  }
  if (r.fresh_inputs > 0) {
    out << "\nFresh random inputs of the same shapes: " << r.fresh_inputs << " compared, " << r.fresh_mismatches
        << " differed\n";
  }
  if (!r.warnings.empty()) {
    out << "\nThe trace may not generalise\n";
    for (const TraceWarning& w : r.warnings) out << "  " << w.kind << ": " << printable(w.message) << '\n';
  }
  out << '\n';
  if (o.written) {
    out << "wrote " << o.output << " (" << human_size(o.size) << "), stamped in " << o.stamp_record << '\n';
    if (!o.carried.empty()) {
      out << "  kept " << o.carried.size() << " extra file(s) of the original:";
      for (size_t i = 0; i < o.carried.size() && i < 20; ++i) out << ' ' << o.carried[i];
      if (o.carried.size() > 20) out << " ... and " << o.carried.size() - 20 << " more";
      out << '\n';
    }
  } else {
    out << "nothing written\n";
  }
}

nlohmann::ordered_json convert_to_json(const ConvertReport& r, const ConvertOutcome& o) {
  nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
  for (const TraceWarning& w : r.warnings) warnings.push_back({{"kind", w.kind}, {"message", w.message}});
  nlohmann::ordered_json doc = {{"schema", "tsarchive." + o.command + "/1"},
                                {"file", o.file},
                                {"output", o.output},
                                {"written", o.written},
                                {"passed", o.failure.empty()},
                                {"method", r.method},
                                {"signature", r.schema},
                                {"libtorch", r.libtorch_version},
                                {"steps", r.steps},
                                {"reloaded_with", r.reloaded_with},
                                {"nodes_before", r.nodes_before},
                                {"nodes_after", r.nodes_after},
                                {"inputs", values_to_json(r.inputs)},
                                {"outputs", values_to_json(r.outputs)},
                                {"checks", checks_to_json(r.checks)},
                                {"fresh_inputs", {{"compared", r.fresh_inputs}, {"mismatched", r.fresh_mismatches}}},
                                {"warnings", warnings},
                                {"methods", r.methods},
                                {"dropped_methods", r.dropped_methods},
                                {"notes", r.notes}};
  if (o.written) {
    doc["size"] = o.size;
    doc["stamp_record"] = o.stamp_record;
    doc["extra_files_kept"] = o.carried;
  }
  if (!o.failure.empty()) doc["failure"] = o.failure;
  return doc;
}

void render_graph_dot(const MethodGraph& g, std::ostream& out) {
  // Which node made each value, for the edges.
  std::map<int, size_t> producer;
  std::map<std::pair<int, int>, std::vector<size_t>> members;  // (parent, block) -> nodes, in order
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].outputs) producer.emplace(v, i);
    members[{g.nodes[i].parent, g.nodes[i].block}].push_back(i);
  }
  out << "digraph \"" << dot_escape(g.method) << "\" {\n";
  out << "  label=\"" << dot_escape(g.schema) << "\";\n  labelloc=t;\n  rankdir=TB;\n";
  out << "  node [shape=box, style=rounded, fontname=\"monospace\", fontsize=10];\n";
  out << "  edge [fontname=\"monospace\", fontsize=8];\n";
  std::function<void(int, int, const std::string&)> block = [&](int parent, int which, const std::string& indent) {
    for (size_t i : members[{parent, which}]) {
      const GraphNode& n = g.nodes[i];
      const bool constant = n.kind == "prim::Constant";
      out << indent << 'n' << i << " [label=\"" << dot_escape(node_label(g, n)) << '"'
          << (constant ? ", shape=plaintext, fontcolor=gray40" : "")
          << (n.kind == "prim::Param" || n.kind == "prim::Return" ? ", shape=ellipse" : "") << "];\n";
      for (int b = 0; members.count({static_cast<int>(i), b}) > 0; ++b) {
        out << indent << "subgraph cluster_" << i << '_' << b << " {\n";
        out << indent << "  label=\"" << dot_escape(n.kind) << " block " << b << "\";\n  " << indent << "style=dashed;\n";
        block(static_cast<int>(i), b, indent + "  ");
        out << indent << "}\n";
        // The block's inputs come from its node: a dotted edge keeps them together.
        out << indent << 'n' << i << " -> n" << members[{static_cast<int>(i), b}].front() << " [style=dotted];\n";
      }
    }
  };
  block(-1, 0, "  ");
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::set<int> drawn;  // one edge per value, however often the node takes it
    for (int v : g.nodes[i].inputs) {
      const auto from = producer.find(v);
      if (from == producer.end() || !drawn.insert(v).second) continue;
      const GraphValue& value = g.values[static_cast<size_t>(v)];
      out << "  n" << from->second << " -> n" << i << " [tooltip=\"" << dot_escape(value.name + " : " + value.type)
          << "\"];\n";
    }
  }
  out << "}\n";
}

nlohmann::ordered_json graph_to_json(const MethodGraph& g, const std::string& file) {
  // Counted as trace/convert count them: blocks' parameter and return nodes are not operations.
  const auto nodes = std::count_if(g.nodes.begin(), g.nodes.end(), [](const GraphNode& n) {
    return n.kind != "prim::Param" && n.kind != "prim::Return";
  });
  return {{"schema", "tsarchive.graph/1"}, {"file", file},   {"method", g.method}, {"signature", g.schema},
          {"inlined", g.inlined},          {"nodes", nodes}, {"text", g.text}};
}

void render_ops_yaml(const OpsReport& ops, const std::string& file, std::ostream& out) {
  out << "# Root operators of " << file << " (" << ops.source << "), " << plural(ops.operators.size(), "operator")
      << ",\n# as PyTorch's selective build takes them (SELECTED_OP_LIST, like torch.jit.export_opnames).\n";
  for (const std::string& op : ops.operators) out << "- " << printable(op) << '\n';
}

nlohmann::ordered_json ops_to_json(const OpsReport& ops, const std::string& file) {
  return {{"schema", "tsarchive.ops/1"}, {"file", file}, {"source", ops.source}, {"operators", ops.operators},
          {"notes", ops.notes}};
}

}  // namespace tsarchive::cli
