// The Open Inference Protocol (KServe v2) over HTTP/REST as data: tensors in
// JSON ("datatype", "shape", "data" row-major, flat or nested) to and from
// HostTensor, infer requests and responses, and dynamic batching's stacking
// of requests on dimension 0. No sockets, no libtorch.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/host_value.h"
#include "contract/serve.h"

namespace tsarchive::serve {

// A request the protocol refuses: the HTTP status and the message of its
// {"error": ...} body.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// "FP32" <-> "float32" (model.h's dtype names): BOOL, UINT8, INT8, INT16,
// INT32, INT64, FP16, BF16, FP32, FP64. Nothing for others (BYTES, complex).
std::optional<std::string> dtype_of_datatype(std::string_view datatype);
std::optional<std::string> datatype_of_dtype(std::string_view dtype);
size_t element_size(std::string_view dtype);

struct InferInput {
  std::string name;
  HostTensor tensor;  // contiguous
  // A BYTES input: its one string (a str parameter's value); then `tensor`
  // is empty.
  std::optional<std::string> text;
};

struct InferRequest {
  std::string id;                    // echoed back; may be empty
  std::vector<InferInput> inputs;
  std::vector<std::string> outputs;  // the outputs asked for; empty: all
  // The binary tensor data extension: outputs asked for with
  // "parameters": {"binary_data": true}, or every output with the request's
  // "parameters": {"binary_data_output": true}.
  std::vector<std::string> binary_outputs;
  bool binary_data_output = false;
  // The request's top-level "parameters" object (null when absent): the
  // protocol's keys and the method's non-tensor arguments (arguments.h),
  // every object's keys in the request's order (a Dict argument keeps it).
  nlohmann::ordered_json parameters;
};

// Parses an infer request body. ApiError(400) naming the problem: not JSON,
// not the protocol's shape, an unknown datatype, values that do not fit the
// datatype, or a count of values that does not match the shape.
//
// With `json_size` (the Inference-Header-Content-Length header), the binary
// tensor data extension: the body's first json_size bytes are the JSON, the
// rest the raw little-endian bytes of the inputs that give
// "parameters": {"binary_data_size": N} instead of "data", in their order.
// A BYTES input holds one string (shape [] or [1]; JSON data, or binary as a
// 4-byte little-endian length and the bytes): a str parameter's value. More
// strings are refused (400): a tensor parameter cannot hold strings.
InferRequest parse_infer_request(std::string_view body, std::optional<uint64_t> json_size = std::nullopt);

// An upper estimate of the memory parse_infer_request takes for `body` on
// top of the body itself, counted on the bytes before anything is parsed:
// nlohmann's parsed values (16 bytes each in arrays that grow by doubling, so
// up to 48 while one grows; an object's members as map nodes) and the
// decoded tensors. A JSON body costs about 25 times its size at most, binary
// tensor data its size once more.
uint64_t parse_cost(std::string_view body, std::optional<uint64_t> json_size = std::nullopt);

// One tensor as {"name", "datatype", "shape", "data"}; ApiError(500) for a
// dtype the JSON form cannot carry.
nlohmann::json tensor_json(const NamedTensor& tensor);

// {"model_name", "id", "outputs": [...]}: the outputs asked for (all when
// `wanted` is empty), in the model's order. ApiError(400) for an output asked
// for that the model does not return.
//
// Outputs named in `binary` (all with `all_binary`) are sent as raw bytes
// after the JSON, each with "parameters": {"binary_data_size": N} instead of
// "data"; then *json_size is the JSON's length (the response's
// Inference-Header-Content-Length), else 0.
//
// ApiError(500) naming --max-response as soon as the text would pass
// `max_bytes`: it stops there rather than finishing a response that is not
// sent. The JSON outputs' values are written straight into the text (no
// parsed copy of them), as nlohmann writes them.
std::string render_infer_response(const std::string& model, const std::string& id,
                                  const std::vector<NamedTensor>& outputs, const std::vector<std::string>& wanted,
                                  const std::vector<std::string>& binary = {}, bool all_binary = false,
                                  size_t* json_size = nullptr, uint64_t max_bytes = UINT64_MAX);

// An upper estimate of render_infer_response's length for `outputs` (all of
// them, as JSON or binary), from their shapes: what to reserve for it.
uint64_t response_size_bound(const std::vector<NamedTensor>& outputs, const std::vector<std::string>& binary,
                             bool all_binary);

// GET /v2/models/{name}: {"name", "versions", "platform", "inputs", "outputs"}.
// A value's shape is its recorded one (from the archive's self-check, by
// name) with -1 for the batch dimension, or [-1] (unknown) without one.
nlohmann::json model_metadata(const std::string& name, const ServedModelInfo& info,
                              const std::map<std::string, std::vector<int64_t>>& recorded_shapes = {});

// The sizes in a recorded self-check's value line ("x: Tensor float32 [2, 8]"
// gives x and {2, 8}); nothing for a line that is not a tensor's.
std::optional<std::pair<std::string, std::vector<int64_t>>> recorded_shape(const std::string& line);

// --- dynamic batching --------------------------------------------------------------

// Rows on dimension 0 of a request's first input, when every input of it has
// a dimension 0 of that size; nothing otherwise (it then runs alone).
std::optional<int64_t> batch_rows(const std::vector<HostTensor>& inputs);
// Whether two requests' inputs stack: same count, dtypes, and every
// dimension after the first.
bool stackable(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b);
// The requests' inputs concatenated on dimension 0, input by input.
std::vector<HostTensor> stack(const std::vector<const std::vector<HostTensor>*>& requests);
// A batched call's outputs split back by `rows`; nothing when an output's
// dimension 0 is not the sum of the rows (run each request alone then).
std::optional<std::vector<std::vector<NamedTensor>>> unstack(const std::vector<NamedTensor>& outputs,
                                                              const std::vector<int64_t>& rows);

}  // namespace tsarchive::serve
