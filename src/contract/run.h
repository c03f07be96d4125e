// `tsarchive run` as data: what to run (RunRequest) and what happened
// (RunReport). The CLI fills the request from the command line and the core
// (inputs, expected outputs: host_value.h); the torch layer runs it and fills
// the report; the CLI renders it. Nothing here includes libtorch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/device.h"
#include "contract/host_value.h"
#include "contract/profile.h"

namespace tsarchive {

// |actual - expected| <= atol + rtol * |expected|, element-wise (torch.allclose).
// `scaled`: atol is for outputs within +-1 and grows with the output's largest
// finite |expected| (convert's default: freezing and fusing reassociate float
// arithmetic, whose rounding follows the magnitudes computed, so an element
// near zero in an output that reaches +-47 is off by some 1e-5 in PyTorch's
// own torch.jit.freeze too). A --atol the user gives is taken as it is.
struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-3;
  bool scaled = false;
};

enum class SaveFormat { None, Pt, Npy };

// RunRequest::on_phase's phase while the method's arguments are made from
// the inputs (and summarized for the Inputs table).
constexpr const char* kPreparingInputs = "preparing the inputs";

struct RunRequest {
  std::string archive;                      // a path libtorch opens (the core checked it first)
  std::string display_name;                 // the path the user gave, for messages
  std::string method = "forward";
  std::vector<HostValue> inputs;            // in argument order; may be empty
  std::string device = "cpu";               // "cpu", "cuda", "cuda:N"
  uint64_t seed = 0;
  int threads = 0;                          // intra-op threads; 0: libtorch's default
  std::vector<std::string> libraries;       // dlopen()ed before the model is loaded
  bool lite = false;                        // a .ptl: run by the lite interpreter (_load_for_mobile)
  // A .pt2: the AOTInductor model to run (data/aotinductor/<name>/), loaded by
  // torch::inductor::AOTIModelPackageLoader; `method` is unused then. Empty:
  // a TorchScript archive.
  std::string aoti_model;

  // Checks of the first call's outputs.
  std::optional<HostValue> expect;
  Tolerance tolerance;
  std::map<std::string, Tolerance> tolerance_by_path;  // "out[1]" -> its own tolerance

  // Timing: after `warmup` calls, `iterations` calls or as many as fit in
  // `duration_s` (whichever is given), for each batch size in `batch_sizes`
  // (empty: the inputs as given).
  int warmup = 0;
  int iterations = 0;
  double duration_s = 0;
  std::vector<int64_t> batch_sizes;
  // Called a few times a second while timing with a line of progress, and
  // with "" when a timing loop ends (the CLI shows it on a TTY).
  std::function<void(const std::string&)> on_progress;
  // Called in the worker when it starts something the user should hear
  // about if a limit stops it there ("preparing the inputs"), and again with
  // "" when it goes back to the job's activity (calling the method): a
  // memory limit hit while the inputs are made is not the model's doing.
  std::function<void(const std::string&)> on_phase;

  // Serialized copies of the first call's inputs and outputs, for
  // --save-inputs / --save-outputs / --record (Pt: torch.save format; Npy:
  // one tensor).
  SaveFormat save_inputs = SaveFormat::None;
  SaveFormat save_outputs = SaveFormat::None;

  // Operator profiling of the timed calls (after the warm-up ones), and the
  // API usage keys libtorch fires from before the load to the end.
  ProfileRequest profile;
  bool api_usage = false;
};

struct TensorSummary {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string device;
  uint64_t numel = 0;
  // Over the finite elements (all elements for integer and bool tensors);
  // absent when there are none. Complex tensors are summarised by modulus.
  std::optional<double> min, max, mean, std;
  uint64_t nan = 0;
  uint64_t inf = 0;
};

// One node of a value tree, flattened in walk order: out, out[0], out[1]["boxes"].
struct ValueSummary {
  std::string path;
  std::string type;        // Tensor, tuple, list, dict, int, float, bool, str, None, complex, Device, object
  std::string class_name;  // objects: the TorchScript class, "__torch__.models.Box"
  std::string value;       // for people: scalars and strings as text, "2 items" for containers
  // The same value typed, for JSON: one of these for int, float, bool and str.
  std::optional<int64_t> integer;
  std::optional<double> real;
  std::optional<bool> boolean;
  std::optional<std::string> text;
  std::optional<TensorSummary> tensor;
  int depth = 0;
};

// One output compared with its expected value.
struct OutputCheck {
  std::string path;
  Tolerance tolerance;
  bool passed = false;
  std::string problem;          // "shape [2, 3] vs expected [3, 2]", "missing", ...
  uint64_t elements = 0;
  uint64_t mismatched = 0;      // elements outside tolerance
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::vector<int64_t> worst_index;  // where |actual - expected| - tolerance is largest
  std::optional<double> actual, expected;  // values there
};

struct LatencySummary {
  uint64_t iterations = 0;
  int warmup = 0;
  double min_ms = 0, mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  double total_s = 0;
  double throughput_per_s = 0;  // calls per second (x batch size: items per second)
};

struct TimedBatch {
  int64_t batch_size = 0;  // 0: the inputs as given
  LatencySummary timing;
};

struct RunReport {
  std::string libtorch_version;
  std::string device;       // as used: "cpu", "cuda:0"
  std::string device_name;  // "CPU", "NVIDIA H100 80GB HBM3"
  int threads = 0;
  std::string method;
  std::string schema;       // forward(__torch__.MLP self, Tensor x) -> Tensor
  std::vector<ValueSummary> inputs;
  std::vector<ValueSummary> outputs;
  double first_call_ms = 0;
  std::vector<OutputCheck> checks;  // with RunRequest::expect
  std::vector<TimedBatch> timings;
  std::string saved_inputs;   // serialized per RunRequest::save_inputs
  std::string saved_outputs;
  std::vector<std::string> notes;
  std::optional<ProfileReport> profile;  // with RunRequest::profile
  std::optional<std::vector<std::string>> api_usage;  // with RunRequest::api_usage, in firing order

  uint64_t nonfinite() const;  // NaN + Inf over all outputs
  bool checks_passed() const;
};

// min/mean/percentiles (nearest rank) of per-call latencies in milliseconds.
LatencySummary summarize_latencies(std::vector<double> ms, int warmup, int64_t batch_size);

}  // namespace tsarchive
