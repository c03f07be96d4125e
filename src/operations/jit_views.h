// `inspect --graph` and `inspect --ops` as operations: a method's graph and
// the root operators a model calls. For a TorchScript archive libtorch answers
// in a worker, after the archive passes the gate (gate.h); a .pt2's program is
// data (its JSON), read by the core without libtorch (core/inspect/pt2_graph.h).
#pragma once

#include <string>

#include "contract/jit.h"
#include "operations/notes.h"
#include "operations/worker_settings.h"

namespace tsarchive {

struct JitViewSettings {
  std::string path;
  std::string method;    // default: forward (of a .pt2: its program)
  bool inlined = false;  // --graph: calls inlined
  WorkerSettings worker;
};

// Error(Usage) for a lite-interpreter archive that holds bytecode only (it has no graph).
MethodGraph read_method_graph(const JitViewSettings& settings, const NoteSink& notes);

OpsReport list_root_operators(const JitViewSettings& settings, const NoteSink& notes);

}  // namespace tsarchive
