// Rendering of the JIT commands: trace and convert (text, JSON
// tsarchive.trace/1 and tsarchive.convert/1), inspect --graph (libtorch's
// text, Graphviz DOT, JSON tsarchive.graph/1) and inspect --ops (a YAML list
// for PyTorch's selective build, JSON tsarchive.ops/1).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "contract/jit.h"
#include "operations/convert.h"

namespace tsarchive::cli {

void render_convert_text(const ConvertReport& report, const ConvertOutcome& outcome, std::ostream& out);
nlohmann::ordered_json convert_to_json(const ConvertReport& report, const ConvertOutcome& outcome);

// digraph of every node; blocks of prim::If and prim::Loop as nested clusters.
void render_graph_dot(const MethodGraph& graph, std::ostream& out);
nlohmann::ordered_json graph_to_json(const MethodGraph& graph, const std::string& file);

// "- aten::conv2d" lines under a comment naming the file and the source.
void render_ops_yaml(const OpsReport& ops, const std::string& file, std::ostream& out);
nlohmann::ordered_json ops_to_json(const OpsReport& ops, const std::string& file);

}  // namespace tsarchive::cli
