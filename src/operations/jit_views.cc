#include "operations/jit_views.h"

#include <algorithm>

#include "base/error.h"
#include "contract/torch_backend.h"
#include "core/inspect/pt2_graph.h"
#include "operations/gate.h"
#include "operations/opened_archive.h"
#include "worker/worker.h"

namespace tsarchive {
namespace {

// What libtorch is asked about the checked archive.
GraphRequest graph_request(const JitViewSettings& settings, const CheckedArchive& checked, const TorchArchive& archive) {
  GraphRequest request;
  request.archive = checked.libtorch_path();
  request.display_name = settings.path;
  request.method = settings.method;
  request.inlined = settings.inlined;
  request.lite = archive.kind() == FileKind::LiteInterpreter;
  return request;
}

}  // namespace

MethodGraph read_method_graph(const JitViewSettings& settings, const NoteSink& notes) {
  const OpenedArchive opened(settings.path, FileAccess::Read, kReaderLockTimeout, "cannot show the graph of this file",
                             notes, /*accept_pt2=*/true);
  const TorchArchive& archive = opened.archive();
  if (archive.kind() == FileKind::ExportedProgram) return pt2_method_graph(archive, settings.method);
  const CheckedArchive checked = pass_gate(opened, settings.worker, "nothing was loaded", notes);
  const GraphRequest request = graph_request(settings, checked, archive);
  // _save_for_lite_interpreter keeps code/ beside the bytecode, and
  // torch::jit::load (what graph_of calls) reads it: only a bytecode-only
  // archive has no graph to give.
  const bool has_code = std::any_of(archive.records().begin(), archive.records().end(),
                                    [](const Record& r) { return r.kind == RecordKind::Code; });
  if (request.lite && !has_code) {
    throw Error(ErrorKind::Usage, "a lite-interpreter archive holds bytecode, not graphs", settings.path,
                "use --ops for its operators, or --graph on the .pt it was made from");
  }
  return in_worker<MethodGraph>(worker_job(settings.worker, checked, "reading the graph", notes),
                                [&](TorchBackend& torch) { return torch.graph(request); });
}

OpsReport list_root_operators(const JitViewSettings& settings, const NoteSink& notes) {
  const OpenedArchive opened(settings.path, FileAccess::Read, kReaderLockTimeout,
                             "cannot list the operators of this file", notes, /*accept_pt2=*/true);
  const TorchArchive& archive = opened.archive();
  if (archive.kind() == FileKind::ExportedProgram) return pt2_operators(archive, settings.method);
  const CheckedArchive checked = pass_gate(opened, settings.worker, "nothing was loaded", notes);
  const GraphRequest request = graph_request(settings, checked, archive);
  return in_worker<OpsReport>(worker_job(settings.worker, checked, "listing the operators", notes),
                              [&](TorchBackend& torch) { return torch.operators(request); });
}

}  // namespace tsarchive
