#include "core/inspect/pt2_graph.h"

#include <map>
#include <set>

#include "format/pt2.h"

namespace tsarchive {
namespace {

std::string joined(const std::vector<std::string>& items, const std::string& prefix = "") {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + prefix + i;
  return out;
}

class ValueTable {
 public:
  ValueTable(const Pt2Graph& g, MethodGraph& out) : g_(g), out_(out) {}
  int operator()(const std::string& name) {
    const auto [it, fresh] = index_.emplace(name, static_cast<int>(out_.values.size()));
    if (fresh) out_.values.push_back(GraphValue{"%" + name, type(name)});
    return it->second;
  }
  std::string type(const std::string& name) const {
    const auto it = g_.types.find(name);
    return it == g_.types.end() ? std::string() : it->second;
  }
  std::vector<int> all(const std::vector<std::string>& names) {
    std::vector<int> ids;
    for (const std::string& n : names) ids.push_back((*this)(n));
    return ids;
  }

 private:
  const Pt2Graph& g_;
  MethodGraph& out_;
  std::map<std::string, int> index_;
};

}  // namespace

MethodGraph pt2_method_graph(const TorchArchive& archive, const std::string& program) {
  const Pt2Graph g = read_pt2_graph(archive, program);
  MethodGraph out;
  out.method = g.program;
  ValueTable values(g, out);
  const auto typed = [&](const std::string& name) {
    const std::string type = values.type(name);
    return "%" + name + (type.empty() ? "" : ": " + type);
  };
  std::vector<std::string> user_inputs;
  const auto count = [](size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::string text = "graph " + g.program + " (" + g.record + "): " + count(g.inputs.size(), "input") + ", " +
                     count(g.nodes.size(), "node") + ", " + count(g.outputs.size(), "output") + "\n";
  for (const std::string& in : g.inputs) {
    const auto role = g.roles.find(in);
    const std::string what = role == g.roles.end() ? "" : role->second;
    if (what == "user_input") user_inputs.push_back(typed(in));
    text += "  " + typed(in) + (what.empty() ? "" : "  (" + what + ")") + "\n";
  }
  out.schema = g.program + "(" + joined(user_inputs) + ")";
  out.nodes.push_back(GraphNode{"prim::Param", "", "", {}, values.all(g.inputs), -1, 0});
  for (const Pt2GraphNode& n : g.nodes) {
    std::vector<std::string> outs;
    for (const std::string& o : n.outputs) outs.push_back(typed(o));
    text += "  " + (outs.empty() ? std::string() : joined(outs) + " = ") + n.target + "(" + joined(n.args) + ")\n";
    // DOT shows what is not an edge: the literal arguments.
    std::vector<std::string> literals;
    for (const std::string& a : n.args) {
      if (a.find('%') == std::string::npos) literals.push_back(a);
    }
    out.nodes.push_back(GraphNode{n.target, joined(literals), "", values.all(n.inputs), values.all(n.outputs), -1, 0});
  }
  text += "  return (" + joined(g.outputs, "%") + ")\n";
  out.nodes.push_back(GraphNode{"prim::Return", "", "", values.all(g.outputs), {}, -1, 0});
  out.text = std::move(text);
  return out;
}

OpsReport pt2_operators(const TorchArchive& archive, const std::string& program) {
  const Pt2Graph g = read_pt2_graph(archive, program);
  std::set<std::string> operators, others;
  for (const Pt2GraphNode& n : g.nodes) {
    // An operator: torch.ops.namespace.name.overload ("higher_order.cond"
    // has no overload: not one a selective build lists).
    const size_t first = n.target.find('.');
    const size_t last = n.target.rfind('.');
    if (!n.torch_op || first == std::string::npos || first == last) {
      others.insert(n.torch_op ? "torch.ops." + n.target : n.target);
      continue;
    }
    const std::string overload = n.target.substr(last + 1);
    operators.insert(n.target.substr(0, first) + "::" + n.target.substr(first + 1, last - first - 1) +
                     (overload == "default" ? "" : "." + overload));
  }
  OpsReport report;
  report.operators.assign(operators.begin(), operators.end());
  report.source = "graph of " + g.record;
  if (!others.empty()) {
    std::string list;
    for (const std::string& o : others) list += (list.empty() ? "" : ", ") + o;
    report.notes.push_back("call targets that are not operators, left out: " + list);
  }
  return report;
}

}  // namespace tsarchive
