#include "worker/worker_codec.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "base/bounded_json.h"
#include "contract/jit.h"
#include "contract/run.h"
#include "contract/serve.h"
#include "contract/torch_backend.h"

namespace nlohmann {
template <class T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& value) {
    if (value) {
      j = *value;
    } else {
      j = nullptr;
    }
  }
  static void from_json(const json& j, std::optional<T>& value) {
    if (j.is_null()) {
      value.reset();
    } else {
      value = j.get<T>();
    }
  }
};
}  // namespace nlohmann

namespace tsarchive {

// Every field of every result type; a field missing here does not cross the
// pipe (tests/unit/test_worker.cc round-trips a report with each one set).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TorchRuntimeInfo, libtorch_version, library_path, cuda_built, cuda_device_count, cuda_devices)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Tolerance, atol, rtol, scaled)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TensorSummary, dtype, shape, device, numel, min, max, mean, std, nan, inf)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ValueSummary, path, type, class_name, value, integer, real, boolean, text, tensor,
                                   depth)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OutputCheck, path, tolerance, passed, problem, elements, mismatched, max_abs_error,
                                   max_rel_error, worst_index, actual, expected)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LatencySummary, iterations, warmup, min_ms, mean_ms, p50_ms, p90_ms, p99_ms, max_ms,
                                   total_s, throughput_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TimedBatch, batch_size, timing)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OperatorEvent, name, scope, model_id, thread, start_ns, duration_ns, self_ns,
                                   input_shapes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OperatorStats, name, scope, model_id, input_shapes, calls, total_ns, self_ns, min_ns,
                                   max_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ObserverSnapshot, sample, record_shapes, sampled_calls, dropped_events, operators,
                                   events)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProfileReport, observed, model_id, calls, wall_ms, trace_by, kineto_trace)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TraceWarning, kind, message)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ConvertReport, libtorch_version, method, schema, steps, reloaded_with, inputs,
                                   outputs, checks, fresh_inputs, fresh_mismatches, warnings, notes, nodes_before,
                                   nodes_after, methods, dropped_methods)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GraphValue, name, type)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GraphNode, kind, detail, source, inputs, outputs, parent, block)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MethodGraph, method, schema, inlined, text, values, nodes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OpsReport, operators, source, notes)

namespace {

// Serialized tensors are bytes, not text: CBOR byte strings.
nlohmann::json bytes_value(const std::string& bytes) {
  return nlohmann::json::binary(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}
std::string bytes_of(const nlohmann::json& j) {
  const auto& b = j.get_binary();
  return std::string(b.begin(), b.end());
}

}  // namespace

// serve's tensors: contiguous, their bytes as a CBOR byte string.
void to_json(nlohmann::json& j, const HostTensor& t) {
  j = {{"dtype", t.dtype}, {"shape", t.shape}, {"stride", t.stride}, {"offset", t.offset},
       {"bytes", bytes_value(t.bytes ? *t.bytes : std::string())}};
}

void from_json(const nlohmann::json& j, HostTensor& t) {
  j.at("dtype").get_to(t.dtype);
  j.at("shape").get_to(t.shape);
  j.at("stride").get_to(t.stride);
  j.at("offset").get_to(t.offset);
  t.bytes = std::make_shared<const std::string>(bytes_of(j.at("bytes")));
}

// serve's inputs: a tensor, or what a request's JSON held (no generated
// tensors: a spec string stays a string until the schema converts it).
void to_json(nlohmann::json& j, const HostValue& v) {
  j = {{"kind", static_cast<int>(v.kind)}, {"origin", v.origin}};
  switch (v.kind) {
    case HostValue::Kind::Bool: j["value"] = v.boolean; break;
    case HostValue::Kind::Int: j["value"] = v.integer; break;
    case HostValue::Kind::Float: j["value"] = v.real; break;
    case HostValue::Kind::String: j["value"] = v.string; break;
    case HostValue::Kind::List: j["items"] = v.items; break;
    case HostValue::Kind::Dict: j["entries"] = v.entries; break;
    case HostValue::Kind::Tensor: j["tensor"] = v.tensor; break;
    case HostValue::Kind::None: break;
    case HostValue::Kind::Spec: throw std::logic_error("a generated tensor is not sent to a model worker");
  }
}

void from_json(const nlohmann::json& j, HostValue& v) {
  const int kind = j.at("kind").get<int>();
  if (kind < 0 || kind > static_cast<int>(HostValue::Kind::Tensor) || kind == static_cast<int>(HostValue::Kind::Spec)) {
    throw std::out_of_range("not a value kind");
  }
  v.kind = static_cast<HostValue::Kind>(kind);
  j.at("origin").get_to(v.origin);
  switch (v.kind) {
    case HostValue::Kind::Bool: j.at("value").get_to(v.boolean); break;
    case HostValue::Kind::Int: j.at("value").get_to(v.integer); break;
    case HostValue::Kind::Float: j.at("value").get_to(v.real); break;
    case HostValue::Kind::String: j.at("value").get_to(v.string); break;
    case HostValue::Kind::List: j.at("items").get_to(v.items); break;
    case HostValue::Kind::Dict: j.at("entries").get_to(v.entries); break;
    case HostValue::Kind::Tensor: j.at("tensor").get_to(v.tensor); break;
    default: break;
  }
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NamedTensor, name, tensor)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServedValue, name, type, dtype, has_default)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServedModelInfo, libtorch_version, device, method, schema, inputs, outputs)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServeModelRequest, archive, display_name, method, device, threads, libraries, lite,
                                   sample, model_id)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServedStats, sample, operators, api_usage)

void to_json(nlohmann::json& j, const RunReport& r) {
  j = {{"libtorch_version", r.libtorch_version}, {"device", r.device}, {"device_name", r.device_name},
       {"threads", r.threads}, {"method", r.method}, {"schema", r.schema}, {"inputs", r.inputs},
       {"outputs", r.outputs}, {"first_call_ms", r.first_call_ms}, {"checks", r.checks}, {"timings", r.timings},
       {"saved_inputs", bytes_value(r.saved_inputs)}, {"saved_outputs", bytes_value(r.saved_outputs)},
       {"notes", r.notes}, {"profile", r.profile}, {"api_usage", r.api_usage}};
}

void from_json(const nlohmann::json& j, RunReport& r) {
  j.at("libtorch_version").get_to(r.libtorch_version);
  j.at("device").get_to(r.device);
  j.at("device_name").get_to(r.device_name);
  j.at("threads").get_to(r.threads);
  j.at("method").get_to(r.method);
  j.at("schema").get_to(r.schema);
  j.at("inputs").get_to(r.inputs);
  j.at("outputs").get_to(r.outputs);
  j.at("first_call_ms").get_to(r.first_call_ms);
  j.at("checks").get_to(r.checks);
  j.at("timings").get_to(r.timings);
  r.saved_inputs = bytes_of(j.at("saved_inputs"));
  r.saved_outputs = bytes_of(j.at("saved_outputs"));
  j.at("notes").get_to(r.notes);
  j.at("profile").get_to(r.profile);
  j.at("api_usage").get_to(r.api_usage);
}

template <class Result>
void encode_result_into(const Result& result, std::string& out) {
  // Built in place (an initializer list would copy the converted result, its
  // tensors' bytes included) and written straight into `out`.
  nlohmann::json payload;
  payload["result"] = result;
  nlohmann::json::to_cbor(payload, nlohmann::detail::output_adapter<char>(out));
}

template <class Result>
std::string encode_result(const Result& result) {
  std::string out;
  encode_result_into(result, out);
  return out;
}

template <class Result>
Result decode_result(const std::string& bytes) {
  // Measured first (bounded_json.h): a reply nested 100,000 deep would
  // overflow the parent's stack in from_cbor, and one of millions of empty
  // maps would take 80 times its size decoded.
  const CborShape shape = measure_cbor(bytes, kMaxResultDepth, kMaxResultDecodedBytes);
  if (!shape.well_formed) {
    const bool big = shape.decoded_bytes > kMaxResultDecodedBytes || shape.depth >= kMaxResultDepth;
    throw Error(ErrorKind::Torch,
                big ? "the libtorch worker sent back a result that would take more than " +
                          std::to_string(kMaxResultDecodedBytes >> 20) + " MiB to decode (beyond its tensors' bytes) " +
                          "or is nested deeper than " + std::to_string(kMaxResultDepth) + " levels, which is not decoded"
                    : "the libtorch worker sent back a result that does not decode",
                {},
                big ? "the model's outputs are too many or too deep to report; return fewer values (a tensor is one, "
                      "whatever its size)"
                    : "this is a bug in tsarchive, or native code from the file wrote into the worker's reply; please report it "
                      "with the command line");
  }
  nlohmann::json payload;
  try {
    payload = nlohmann::json::from_cbor(bytes);
    if (payload.contains("result")) return payload.at("result").get<Result>();
    if (payload.contains("error")) {
      const nlohmann::json& e = payload.at("error");
      const int kind = e.at("kind").get<int>();
      if (kind < 1 || kind > 5) throw std::out_of_range("error kind");
      Error error(static_cast<ErrorKind>(kind), e.at("what").get<std::string>(), e.at("file").get<std::string>(),
                  e.at("hint").get<std::string>());
      throw error.with_detail(e.at("detail").get<std::string>());
    }
  } catch (const nlohmann::json::exception&) {
  } catch (const std::out_of_range&) {
  }
  throw Error(ErrorKind::Torch, "the libtorch worker sent back a result that does not decode", {},
              "this is a bug in tsarchive; please report it with the command line");
}

std::string encode_error(const Error& error) {
  const nlohmann::json payload = {{"error",
                                   {{"kind", static_cast<int>(error.kind())},
                                    {"what", error.what()},
                                    {"file", error.file()},
                                    {"hint", error.hint()},
                                    {"detail", error.detail()}}}};
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(payload);
  return std::string(bytes.begin(), bytes.end());
}

#define TSARCHIVE_WORKER_RESULT(Type)                          \
  template std::string encode_result<Type>(const Type&);       \
  template void encode_result_into<Type>(const Type&, std::string&); \
  template Type decode_result<Type>(const std::string& bytes);
TSARCHIVE_WORKER_RESULT(std::string)
TSARCHIVE_WORKER_RESULT(TorchRuntimeInfo)
TSARCHIVE_WORKER_RESULT(RunReport)
TSARCHIVE_WORKER_RESULT(ConvertReport)
TSARCHIVE_WORKER_RESULT(MethodGraph)
TSARCHIVE_WORKER_RESULT(OpsReport)
TSARCHIVE_WORKER_RESULT(ServeModelRequest)
TSARCHIVE_WORKER_RESULT(ServedModelInfo)
TSARCHIVE_WORKER_RESULT(ServedStats)
TSARCHIVE_WORKER_RESULT(std::vector<HostValue>)
TSARCHIVE_WORKER_RESULT(std::vector<NamedTensor>)
#undef TSARCHIVE_WORKER_RESULT

}  // namespace tsarchive
