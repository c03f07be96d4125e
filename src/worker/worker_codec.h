// What a libtorch worker (worker.h) sends back: the torch layer's result, or
// the Error it threw, as CBOR bytes. CBOR, not JSON text, because results hold
// NaN and Inf (output statistics) and arbitrary bytes (--save-outputs).
//
// Payload: a map with one key, "result" (the value) or "error" (kind, what,
// file, hint, detail). Parent and worker are the same binary, so the layout
// needs no version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace tsarchive {

// Defined for std::string, TorchRuntimeInfo, RunReport, ConvertReport,
// MethodGraph and OpsReport; for serve (model_worker.h), ServeModelRequest,
// ServedModelInfo, ServedStats and lists of HostValue and NamedTensor.
template <class Result>
std::string encode_result(const Result& result);
// The same payload appended to `out` (no copy of it made on the way).
template <class Result>
void encode_result_into(const Result& result, std::string& out);

// What decode_result decodes at most: the memory from_cbor would take beyond
// the text and bytes the reply holds (bounded_json.h: about 100 to 300 bytes
// a returned number or string, nothing more for a tensor's bytes), and the
// nesting.
constexpr uint64_t kMaxResultDecodedBytes = uint64_t{128} << 20;
constexpr size_t kMaxResultDepth = 512;

// The result; throws the worker's Error when the payload holds one, and
// Error(Torch) when the bytes are not a payload for `Result`, or pass the
// bounds above.
template <class Result>
Result decode_result(const std::string& bytes);

std::string encode_error(const Error& error);

}  // namespace tsarchive
