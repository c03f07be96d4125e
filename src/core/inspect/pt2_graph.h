// `inspect --graph` of a .pt2: a program's graph from its JSON (format/pt2.h),
// without libtorch, as the same MethodGraph the torch layer gives for a
// TorchScript method, so that text, --format dot and --json render alike.
#pragma once

#include <string>

#include "contract/jit.h"
#include "format/archive.h"

namespace tsarchive {

// The graph of models/<program>.json (empty: "model" or the only program):
// `text` one line per input, node and the return,
//   %x: float32[s77, 4]  (user_input)
//   %linear: float32[s77, 8] = aten.linear.default(%x, %p_fc1_weight, %p_fc1_bias)
//   return (%linear_1)
// `values` and `nodes` as for DOT: a prim::Param node making the inputs, one
// node per graph node (kind: its target), a prim::Return node reading the outputs.
MethodGraph pt2_method_graph(const TorchArchive& archive, const std::string& program);

// `inspect --ops` of a .pt2: the operators the graph of models/<program>.json
// calls (empty: as above), named as TorchScript's export_opnames names them
// for a selective build: "torch.ops.aten.add.Tensor" is "aten::add.Tensor",
// a ".default" overload has no overload name ("aten::relu"). Call targets that
// are not operators (Python callables such as "_operator.getitem") are named
// in `notes`, not listed. source: "graph of models/<program>.json".
OpsReport pt2_operators(const TorchArchive& archive, const std::string& program);

}  // namespace tsarchive
