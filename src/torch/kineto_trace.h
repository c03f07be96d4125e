// `run --trace-out` by Kineto, where the linked libtorch has it (kineto_trace.cc):
// libtorch 2.x as pip ships it. Python's torch.profiler.profile does the same
// calls (prepare, enable, disable, save). Elsewhere (Debian's libtorch 1.13 has
// no Kineto) kineto_available() is false and run keeps the observer's trace.
#pragma once

#include <string>

namespace tsarchive::torch_layer {

// A libtorch 2.x whose library really holds Kineto: USE_KINETO is not defined
// for users of the installed headers, so this is asked of the library itself.
bool kineto_available();

// Kineto profiling the calling thread (and the tasks it launches) from
// construction to finish(). Only where kineto_available().
class KinetoTrace {
 public:
  // record_shapes: input shapes in the events' args; cuda: CUDA activity
  // (kernels, memcpys, runtime calls) as well as CPU operators.
  KinetoTrace(bool record_shapes, bool cuda);
  ~KinetoTrace();  // stops profiling if finish() did not
  KinetoTrace(const KinetoTrace&) = delete;
  KinetoTrace& operator=(const KinetoTrace&) = delete;

  // Stops profiling and returns Kineto's Chrome trace (JSON text), its
  // traceName set to trace_name. Throws Error(Io) when the trace cannot be
  // staged in the temporary folder ($TMPDIR, else /tmp), and what libtorch
  // throws when it cannot make it.
  std::string finish(const std::string& trace_name);

 private:
  bool active_ = false;
};

}  // namespace tsarchive::torch_layer
