// `tsarchive serve` as data: a model loaded once in a long-lived worker
// (worker/model_worker.h) that answers many calls. The serve layer sends
// tensors in (HostTensor, contiguous) and gets every output tensor back whole.
// Nothing here includes libtorch.
#pragma once

#include <string>
#include <vector>

#include "contract/device.h"
#include "contract/host_value.h"
#include "tsarchive/operator_events.h"

namespace tsarchive {

struct ServeModelRequest {
  std::string archive;       // a path libtorch opens (the core checked it first)
  std::string display_name;  // the path the user gave, for messages
  std::string method = "forward";
  std::string device = "cpu";
  int threads = 0;  // intra-op threads; 0: libtorch's default
  std::vector<std::string> libraries;
  bool lite = false;  // a .ptl: the lite interpreter
  // --sample P: the operator observer runs in the worker with probability P
  // (0: off), every call tagged with model_id, and libtorch's API usage keys
  // are logged.
  double sample = 0;
  std::string model_id;
};

// What a served model's worker observed since it loaded (ServedModel::stats).
struct ServedStats {
  double sample = 0;  // 0: not observed
  std::vector<OperatorStats> operators;
  std::vector<std::string> api_usage;  // keys fired, in order
};

// One parameter or output of the served method, from its schema.
struct ServedValue {
  std::string name;    // parameter name; outputs: "out", "out[0]", ...
  std::string type;    // TorchScript annotation: Tensor, int, float, ...
  std::string dtype;   // for a Tensor: the dtype to send ("float32": the module's floating parameters'); else ""
  bool has_default = false;
};

struct ServedModelInfo {
  std::string libtorch_version;
  std::string device;  // as used: "cpu", "cuda:0"
  std::string method;
  std::string schema;  // forward(Tensor x) -> Tensor
  std::vector<ServedValue> inputs;
  std::vector<ServedValue> outputs;
};

struct NamedTensor {
  std::string name;
  HostTensor tensor;  // contiguous: stride matches shape, offset 0
};

// A loaded model in the worker. infer() takes one value per leading
// parameter, in order: a Tensor for a Tensor parameter, a JSON-like value
// (core/inputs/input_values.h's host_value_of_json) for any other, converted by the
// schema as `run --input json:` is. It returns every tensor leaf of the output ("out",
// "out[0]", "out[1][\"boxes\"]"; int, float and bool leaves as 0-d tensors).
// Throws Error(Usage) for inputs that do not fit the method, Error(Torch)
// with libtorch's message condensed to one line.
class ServedModel {
 public:
  virtual ~ServedModel() = default;
  virtual ServedModelInfo info() const = 0;
  virtual std::vector<NamedTensor> infer(const std::vector<HostValue>& inputs) = 0;
  // With ServeModelRequest::sample: the sampled operators and API usage keys
  // so far; empty otherwise.
  virtual ServedStats stats() const { return {}; }
};

// A contiguous tensor's strides (in elements) for `shape`.
inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> stride(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) stride[i - 1] = stride[i] * (shape[i] > 0 ? shape[i] : 1);
  return stride;
}

}  // namespace tsarchive
