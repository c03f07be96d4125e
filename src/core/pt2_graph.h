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

}  // namespace tsarchive
