// The served method's arguments from one infer request, and what dynamic
// batching needs to know about them. No sockets, no libtorch.
//
// A Tensor parameter comes from the input of its name. Any other parameter
// (int, float, bool, str, lists, dicts, Optional, tuples) comes from either
//   - an input of its name whose tensor holds its value: one value (shape []
//     or [1]) for a scalar, a 1-D tensor for a list (List[int] as INT64 ...),
//     one BYTES string for a str;
//   - or an entry of the request's top-level "parameters" object keyed by its
//     name, whose JSON value is converted exactly as `run --input json:...`
//     converts it (core/inputs/input_values.h's host_value_of_json, then the schema in
//     the worker): {"parameters": {"scale": 0.5, "opts": {"a": "1x3:float32:ones"}}}.
// The protocol's own request parameters (kReservedParameters) are never
// taken as method arguments. Parameters with defaults may be left out, from
// the first one left out to the end, as with run.
#pragma once

#include <string>
#include <vector>

#include "contract/host_value.h"
#include "contract/serve.h"
#include "serve/v2.h"

namespace tsarchive::serve {

// Request "parameters" keys that belong to the protocol (the binary tensor
// data extension, Triton's sequence and scheduling keys; also any key that
// starts with "triton_", as in Triton): ignored as method arguments, so
// tritonclient's requests stay valid.
extern const std::vector<std::string> kReservedParameters;

// A non-tensor parameter given as an input holds at most this many values.
constexpr uint64_t kMaxValueElements = 65536;
// The tensors a request's parameters describe by specs ("1x3:float32:ones";
// the worker generates them) hold at most this many elements in all.
constexpr uint64_t kMaxSpecElements = uint64_t{1} << 24;

// One value per leading parameter of the method, in order. ApiError(400)
// naming the parameter and what it wants: an unknown input or parameter, a
// missing one, one given twice, a Tensor given in "parameters", a value that
// cannot be the parameter's type, spec strings past kMaxSpecElements in
// all. Takes the input tensors out of `request`. `spec_bytes`, when given,
// gets the bytes of the tensors the worker will generate from spec strings.
std::vector<HostValue> method_arguments(const std::string& model, const ServedModelInfo& info, InferRequest& request,
                                        uint64_t* spec_bytes = nullptr);

// The tensors among a request's arguments, in order: what batching stacks.
std::vector<HostTensor> tensors_of(const std::vector<HostValue>& arguments);
// Whether two requests may run in one batch as far as their non-tensor
// arguments go: the same count, tensors at the same places, and every other
// value equal (a float NaN equals nothing, and a value holding a spec string
// makes a tensor that cannot be split by request: such a request runs alone).
bool same_non_tensors(const std::vector<HostValue>& a, const std::vector<HostValue>& b);
// `arguments` with its tensors replaced, in order, by `tensors` (a batch's
// stacked ones).
std::vector<HostValue> with_tensors(std::vector<HostValue> arguments, std::vector<HostTensor> tensors);

}  // namespace tsarchive::serve
