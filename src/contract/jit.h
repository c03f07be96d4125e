// The JIT commands as data: `trace` and `convert` (what to make from an
// archive, and what came of it) and `inspect --graph/--ops` (a method's IR
// graph, the operators a model calls). The CLI fills the requests; the torch
// layer does the work and fills the reports; the CLI renders them. Nothing
// here includes libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/run.h"

namespace tsarchive {

// trace and convert are one pipeline; the steps run in this order, all but
// eval and save optional: eval -> trace -> freeze -> optimize (for inference
// | for mobile) -> save (TorchScript .pt, or lite-interpreter .ptl).
struct ConvertRequest {
  // The original archive, its method and the check inputs (archive,
  // display_name, method, inputs, seed, tolerance); run on CPU.
  RunRequest source;
  bool trace = false;
  int fresh_inputs = 0;  // trace: also compare on this many freshly generated inputs
  bool freeze = false;
  bool optimize_for_inference = false;  // freezes first
  bool optimize_for_mobile = false;     // freezes itself (after folding conv+batchnorm)
  bool lite = false;                    // Module::_save_for_mobile
  std::string output;  // where libtorch writes (a staging folder; the top folder is its stem)
  std::string stamp;   // extra/producer_info.json, supplied by the export hook during the save
};

// Why a trace may not compute what the original does on other inputs.
struct TraceWarning {
  std::string kind;     // "fresh-inputs", "value-control-flow", "shape-control-flow"
  std::string message;  // one sentence for people
};

struct ConvertReport {
  std::string libtorch_version;
  std::string method;
  std::string schema;                     // of the original's method
  std::vector<std::string> steps;         // done, in order: "eval", "trace forward", "freeze", ...
  std::string reloaded_with;              // "torch::jit::load" | "torch::jit::_load_for_mobile"
  std::vector<ValueSummary> inputs;       // the check inputs
  std::vector<ValueSummary> outputs;      // the reloaded archive's outputs on them
  std::vector<OutputCheck> checks;        // those outputs against the original's
  int fresh_inputs = 0;                   // compared on this many fresh inputs
  int fresh_mismatches = 0;               // of which this many differed
  std::vector<TraceWarning> warnings;
  std::vector<std::string> notes;
  uint64_t nodes_before = 0;              // nodes of the method's inlined graph
  uint64_t nodes_after = 0;
  // The root module's methods in the original, and those the written archive
  // lacks (a trace records one method; every other step keeps them all, as
  // freeze(preserved_attrs) and optimize_for_mobile(preserved_methods) do).
  std::vector<std::string> methods;
  std::vector<std::string> dropped_methods;

  bool checks_passed() const {
    for (const OutputCheck& c : checks) {
      if (!c.passed) return false;
    }
    return true;
  }
};

// inspect --graph / --ops: which archive and method.
struct GraphRequest {
  std::string archive;       // a path libtorch opens (the core checked it first)
  std::string display_name;
  std::string method;        // empty: forward
  bool inlined = false;      // calls to other methods and functions inlined (torch::jit::Inline)
  bool lite = false;
};

// A graph as plain data, for rendering as DOT: every node of every block,
// in order; a block's parameters and returns are nodes of kind prim::Param
// and prim::Return inside it.
struct GraphValue {
  std::string name;  // %x.1
  std::string type;  // Tensor, int, __torch__.M
};
struct GraphNode {
  std::string kind;     // aten::conv2d, prim::Constant
  std::string detail;   // a constant's value, a GetAttr's name
  std::string source;   // code/__torch__/m.py:12
  std::vector<int> inputs, outputs;  // indices into MethodGraph::values
  int parent = -1;      // the node owning the block this node is in; -1: the graph's own block
  int block = 0;        // which of the parent's blocks
};
struct MethodGraph {
  std::string method;
  std::string schema;
  bool inlined = false;
  std::string text;  // libtorch's own printing (Graph::toString)
  std::vector<GraphValue> values;
  std::vector<GraphNode> nodes;
};

struct OpsReport {
  std::vector<std::string> operators;  // "aten::conv2d", "aten::add.Tensor": name.overload, sorted
  std::string source;  // "export_opnames", "bytecode", "graph scan"
  std::vector<std::string> notes;
};

}  // namespace tsarchive
