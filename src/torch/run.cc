// `tsarchive run` in the torch layer: load a module (TorchScript, or the lite
// interpreter for .ptl), turn the core's HostValues into IValues by the
// method's schema, call it under NoGradGuard, and describe what came back as
// plain data (run.h). Timing loops are here; loading, argument lists,
// descriptions, comparisons and serialized copies are shared with the JIT
// commands (values.h); rendering is the CLI's.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <fstream>
#include <string>

#include "kineto_trace.h"
#include "run_module.h"
#include "torch_errors.h"
#include "base/error.h"
#include "tsarchive/operator_observer.h"
#include "contract/run.h"
#include "values.h"

namespace tsarchive::torch_layer {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// --- devices ----------------------------------------------------------------------

namespace {

// The CUDA driver API (libcuda, loaded already when libtorch uses a GPU): its
// device queries need no CUDA headers. Null where there is no driver or it
// did not initialize (cuda_init_result says why).
struct CudaDriver {
  int (*init)(unsigned) = nullptr;
  int (*get)(int*, int) = nullptr;
  int (*name)(char*, int, int) = nullptr;
  int (*attribute)(int*, int, int) = nullptr;
  int init_result = -1;  // cuInit's CUresult; -1: no libcuda
};

const CudaDriver& loaded_cuda_driver() {
  static const CudaDriver driver = [] {
    CudaDriver d;
    void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda == nullptr) cuda = ::dlopen("libcuda.so.1", RTLD_NOW);
    if (cuda == nullptr) return d;
    d.init = reinterpret_cast<decltype(d.init)>(::dlsym(cuda, "cuInit"));
    d.get = reinterpret_cast<decltype(d.get)>(::dlsym(cuda, "cuDeviceGet"));
    d.name = reinterpret_cast<decltype(d.name)>(::dlsym(cuda, "cuDeviceGetName"));
    d.attribute = reinterpret_cast<decltype(d.attribute)>(::dlsym(cuda, "cuDeviceGetAttribute"));
    if (d.init == nullptr || d.get == nullptr) return CudaDriver{};
    d.init_result = d.init(0);
    return d;
  }();
  return driver;
}

const CudaDriver* cuda_driver() {
  const CudaDriver& driver = loaded_cuda_driver();
  return driver.get != nullptr && driver.init_result == 0 ? &driver : nullptr;
}

#ifdef TSARCHIVE_TORCH_HAS_CUDA
// True when this process runs under a seccomp filter or no_new_privs: the
// worker's sandbox (sandbox.h) sets both.
bool confined() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Seccomp:", 0) == 0 && line.find('2') != std::string::npos) return true;
    if (line.rfind("NoNewPrivs:", 0) == 0 && line.find('1') != std::string::npos) return true;
  }
  return false;
}

// Why CUDA shows no device although the build has it.
Error no_cuda_device(const std::string& text, const std::string& file) {
  constexpr int kCudaErrorOperatingSystem = 304;
  if (loaded_cuda_driver().init_result == kCudaErrorOperatingSystem && confined()) {
    // The worker starts the driver before its sandbox (worker/sandbox.h),
    // where with driver 580 cuInit fails with 304; when it fails even so, the
    // sandbox is still the first suspect.
    return Error(ErrorKind::Torch,
                 "CUDA did not start in the libtorch worker: the NVIDIA driver's cuInit failed with error 304 (an "
                 "operating-system call it needs failed or was refused, e.g. by the worker's sandbox) (--device " + text + ")",
                 file, "on a model you trust, TSARCHIVE_NO_SANDBOX=1 runs the worker without its sandbox; --device cpu keeps it");
  }
  return Error(ErrorKind::Torch, "no CUDA device is visible (--device " + text + ")", file,
               "check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu");
}
#endif

}  // namespace

c10::Device parse_device(const std::string& text, const std::string& file) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(text);
  } catch (const std::exception&) {
    throw Error(ErrorKind::Usage, "--device '" + text.substr(0, 40) + "' is not a device", file,
                "use cpu, cuda or cuda:N");
  }
  if (device.is_cpu()) return device;
  if (!device.is_cuda()) {
    throw Error(ErrorKind::Usage, "--device " + text + " is not supported", file, "use cpu, cuda or cuda:N");
  }
#ifndef TSARCHIVE_TORCH_HAS_CUDA
  throw Error(ErrorKind::Torch, "this build's libtorch has no CUDA support (--device " + text + ")", file,
              "use --device cpu, or build tsarchive against a CUDA-enabled libtorch (README: Choosing the libtorch)");
#else
  const int count = static_cast<int>(torch::cuda::device_count());
  if (!torch::cuda::is_available() || count == 0) throw no_cuda_device(text, file);
  if (!device.has_index()) device.set_index(0);
  if (device.index() >= count) {
    throw Error(ErrorKind::Torch, "--device " + text + " does not exist: " + std::to_string(count) + " CUDA device(s) visible",
                file, "use cuda:0 to cuda:" + std::to_string(count - 1));
  }
  return device;
#endif
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

namespace {

// --- timing and profiling -------------------------------------------------------------

// The operator observer over the timed calls: installed after the warm-up
// (while no operator runs, as addGlobalCallback requires), every call tagged
// with the model id, removed before the report is made.
//
// --trace-out on a libtorch with Kineto: Kineto records the trace (CUDA
// kernels too on a GPU, which RecordFunction cannot see) over the same calls,
// and the operator table still comes from the observer. Kineto has no
// sampling and no self times per call, and the observer's table is the same
// numbers, scopes and --sample estimates on 1.13 and 2.x (one JSON schema);
// the cost is that both profilers' callbacks run in the profiled calls.
class ProfilingScope {
 public:
  ProfilingScope(const ProfileRequest& request, const c10::Device& device)
      : model_id_(request.model_id), trace_name_(request.trace_name) {
    const bool kineto = request.keep_events && kineto_available();
    OperatorObserverOptions options;
    options.sample = request.sample;
    options.record_shapes = request.record_shapes;
    options.keep_events = request.keep_events && !kineto;
    install_operator_observer(options);
    guard_.emplace(model_id_);
    if (request.keep_events) trace_by_ = kineto ? kTraceByKineto : kTraceByObserver;
    if (!kineto) return;
    try {
      kineto_.emplace(request.record_shapes, device.is_cuda());
    } catch (...) {
      guard_.reset();
      remove_operator_observer();
      throw;
    }
  }
  ~ProfilingScope() {
    kineto_.reset();
    guard_.reset();
    remove_operator_observer();
  }
  ProfilingScope(const ProfilingScope&) = delete;
  ProfilingScope& operator=(const ProfilingScope&) = delete;

  ProfileReport report(const std::vector<double>& latencies_ms) {
    ProfileReport report;
    if (kineto_) report.kineto_trace = kineto_->finish(trace_name_);  // first: stop Kineto before anything else runs
    report.observed = operator_observer_snapshot();
    report.model_id = model_id_;
    report.calls = latencies_ms.size();
    for (double ms : latencies_ms) report.wall_ms += ms;
    report.trace_by = trace_by_;
    return report;
  }

 private:
  std::string model_id_;
  std::string trace_by_;
  std::string trace_name_;
  std::optional<ModelIdGuard> guard_;
  std::optional<KinetoTrace> kineto_;
};

}  // namespace

// `profile`: when given and the request asks for it, the timed calls are
// profiled into it.
LatencySummary time_calls(const std::function<void()>& call_model, const c10::Device& device, const RunRequest& request,
                          int64_t batch, std::optional<ProfileReport>* profile) {
  const auto call = [&] {
    call_model();
    synchronize(device);  // CUDA runs asynchronously: time the work, not the launch
  };
  const std::string label = batch > 0 ? "batch " + std::to_string(batch) + ": " : "";
  for (int i = 0; i < request.warmup; ++i) call();
  std::optional<ProfilingScope> profiling;
  if (profile != nullptr && request.profile.enabled) profiling.emplace(request.profile, device);
  std::vector<double> ms;
  const bool by_duration = request.iterations == 0 && request.duration_s > 0;
  const uint64_t target = by_duration ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(std::max(request.iterations, 1));
  const Clock::time_point start = Clock::now();
  Clock::time_point last_report = start;
  constexpr uint64_t kMaxSamples = 10'000'000;
  while (ms.size() < target && ms.size() < kMaxSamples) {
    const Clock::time_point t0 = Clock::now();
    call();
    const Clock::time_point t1 = Clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (by_duration && std::chrono::duration<double>(t1 - start).count() >= request.duration_s) break;
    if (request.on_progress && t1 - last_report > std::chrono::milliseconds(200)) {
      last_report = t1;
      std::string line = "timing " + label + std::to_string(ms.size());
      line += by_duration ? " calls, " + number_text(std::round(std::chrono::duration<double>(t1 - start).count() * 10) / 10) +
                                " of " + number_text(request.duration_s) + " s"
                          : " of " + std::to_string(target) + " calls";
      request.on_progress(line);
    }
  }
  if (request.on_progress) request.on_progress("");
  if (profiling) *profile = profiling->report(ms);
  return summarize_latencies(std::move(ms), request.warmup, batch);
}

namespace {

std::string cuda_device_name(int index) {
  const CudaDriver* cuda = cuda_driver();
  char buf[256] = {};
  int device = 0;
  if (cuda && cuda->name && cuda->get(&device, index) == 0 && cuda->name(buf, sizeof buf - 1, device) == 0) return buf;
  return "CUDA device " + std::to_string(index);
}

}  // namespace

void load_libraries(const std::vector<std::string>& libraries) {
  for (const std::string& path : libraries) {
    // RTLD_GLOBAL: operator libraries may depend on each other's symbols.
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = ::dlerror();
      // dlerror() starts with the path; the file goes in the parentheses once.
      std::string reason = why ? why : "unknown error";
      if (reason.rfind(path + ": ", 0) == 0) reason = reason.substr(path.size() + 2);
      throw Error(ErrorKind::Torch, "cannot load --load-library: " + reason, path,
                  "give the path of a shared library built against this libtorch (" TORCH_VERSION ")");
    }
  }
}

namespace {

std::string float_dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    default: return c10::toString(t);
  }
}

// "mat1 and mat2 must have the same dtype", "expected scalar type Float but
// found Double": an input of another floating dtype than the model's
// parameters. Names the input and the dtype the parameters have.
Error with_dtype_hint(const Error& e, LoadedModel& model,
                      const std::vector<std::pair<std::string, c10::ScalarType>>& inputs) {
  const std::string what = e.what();
  if (what.find("same dtype") == std::string::npos && what.find("expected scalar type") == std::string::npos &&
      what.find("should be the same") == std::string::npos) {
    return e;
  }
  torch::jit::Module* module = model.script_module();
  if (module == nullptr) return e;
  std::map<c10::ScalarType, size_t> counts;
  for (const auto& p : module->parameters(/*recurse=*/true)) {
    if (p.is_floating_point()) counts[p.scalar_type()] += 1;
  }
  if (counts.empty()) return e;
  const auto most = std::max_element(counts.begin(), counts.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  for (const auto& [name, dtype] : inputs) {
    if (dtype == most) continue;
    const std::string want = float_dtype_name(most), got = float_dtype_name(dtype);
    return Error(e.kind(), what, e.file(),
                 "input '" + name + "' is " + got + ", but the model's parameters are " + want + ": give it as " + want +
                     " (e.g. --input SHAPE:" + want + ", or save it as " + want + ")")
        .with_detail(e.detail());
  }
  return e;
}

}  // namespace

namespace {

// The most common dtype of the module's floating parameters ("float32"), or
// "" when it has none: what a served Tensor input is expected to be.
std::string parameter_float_dtype(LoadedModel& model) {
  torch::jit::Module* module = model.script_module();
  if (module == nullptr) return "";
  std::map<c10::ScalarType, size_t> counts;
  for (const auto& p : module->parameters(/*recurse=*/true)) {
    if (p.is_floating_point()) counts[p.scalar_type()] += 1;
  }
  if (counts.empty()) return "";
  return float_dtype_name(std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
                            return a.second < b.second;
                          })->first);
}

// `serve`: loaded once by open_served_model(), called for every request (or
// batch of requests) the worker is sent.
class LibtorchServedModel final : public ServedModel {
 public:
  explicit LibtorchServedModel(const ServeModelRequest& serve) {
    request_.archive = serve.archive;
    request_.display_name = serve.display_name;
    request_.method = serve.method;
    request_.device = serve.device;
    request_.threads = serve.threads;
    request_.libraries = serve.libraries;
    request_.lite = serve.lite;
    sample_ = serve.sample;
    model_id_ = serve.model_id;
    torch::NoGradGuard no_grad;
    // --sample: the observer is installed before the load (no operator runs
    // yet, as addGlobalCallback requires) and stays for the worker's life.
    if (sample_ > 0) {
      install_api_usage_logger();
      OperatorObserverOptions options;
      options.sample = sample_;
      install_operator_observer(options);
    }
    load_libraries(request_.libraries);
    device_ = parse_device(request_.device, request_.display_name);
    if (request_.threads > 0) at::set_num_threads(request_.threads);
    model_.emplace(request_, device_);
    model_->select(request_.method);

    info_.libtorch_version = TORCH_VERSION;
    info_.device = device_.str();
    info_.method = request_.method;
    info_.schema = model_->signature();
    const std::string float_dtype = parameter_float_dtype(*model_);
    for (const Parameter& p : model_->parameters()) {
      const std::string type = p.type ? p.type->annotation_str() : "Tensor";
      info_.inputs.push_back(ServedValue{p.name, type, type == "Tensor" ? float_dtype : "", p.default_value.has_value()});
    }
    const std::vector<c10::TypePtr> returns = model_->return_types();
    const auto output = [&](const std::string& name, const c10::TypePtr& type) {
      const std::string text = type ? type->annotation_str() : "Tensor";
      info_.outputs.push_back(ServedValue{name, text, text == "Tensor" ? float_dtype : "", false});
    };
    if (returns.size() == 1 && returns[0]->kind() == c10::TypeKind::TupleType) {
      const auto elements = returns[0]->containedTypes();
      for (size_t i = 0; i < elements.size(); ++i) output("out[" + std::to_string(i) + "]", static_type(elements[i]));
    } else if (returns.size() == 1) {
      output("out", returns[0]);
    }
  }

  ServedModelInfo info() const override { return info_; }

  ServedStats stats() const override {
    ServedStats stats;
    if (sample_ <= 0) return stats;
    stats.sample = sample_;
    stats.operators = operator_observer_snapshot().operators;
    stats.api_usage = api_usage_keys();
    return stats;
  }

  std::vector<NamedTensor> infer(const std::vector<HostValue>& inputs) override {
    torch::NoGradGuard no_grad;
    std::optional<ModelIdGuard> tag;  // the observer's events carry the model id
    if (sample_ > 0) tag.emplace(model_id_);
    const std::string& file = request_.display_name;
    RunRequest request = request_;
    // Converted by the schema as run's --input values are (build_arguments).
    for (size_t i = 0; i < inputs.size(); ++i) {
      HostValue v = inputs[i];
      if (v.origin.empty()) v.origin = "input '" + (i < info_.inputs.size() ? info_.inputs[i].name : std::to_string(i)) + "'";
      request.inputs.push_back(std::move(v));
    }
    std::vector<c10::IValue> args;
    std::vector<std::pair<std::string, c10::ScalarType>> input_dtypes;
    {
      Arguments built = torch_call(file, "make the inputs", [&] { return build_arguments(*model_, request, 0); });
      for (size_t i = 0; i < built.given && i < built.values.size(); ++i) {
        const c10::IValue& v = built.values[i];
        if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point()) {
          input_dtypes.emplace_back(built.names[i], v.toTensor().scalar_type());
        }
      }
      for (c10::IValue& v : built.values) args.push_back(to_device(v, device_));
    }
    c10::IValue output;
    try {
      output = torch_call(file, "run " + request_.method, [&] {
        c10::IValue out = model_->call(args);
        synchronize(device_);
        return out;
      });
    } catch (const Error& e) {
      throw with_dtype_hint(e, *model_, input_dtypes);
    }
    std::vector<Leaf> leaves;
    leaves_of(output, "out", leaves);
    std::vector<NamedTensor> out;
    for (const Leaf& leaf : leaves) {
      const c10::IValue& v = leaf.value;
      torch::Tensor t;
      if (v.isTensor()) {
        t = v.toTensor();
      } else if (v.isBool()) {
        t = torch::scalar_tensor(v.toBool(), torch::kBool);
      } else if (v.isInt()) {
        t = torch::scalar_tensor(v.toInt(), torch::kLong);
      } else if (v.isDouble()) {
        t = torch::scalar_tensor(v.toDouble(), torch::kDouble);
      } else {
        throw Error(ErrorKind::Usage, "output " + leaf.path + " is a " + v.tagKind() + ", not a tensor or number", file,
                    "serve answers with tensors only; serve a method that returns tensors");
      }
      if (!t.defined()) {
        throw Error(ErrorKind::Usage, "output " + leaf.path + " is an undefined tensor", file,
                    "serve answers with tensors only");
      }
      out.push_back(NamedTensor{leaf.path, host_tensor(t)});
    }
    return out;
  }

 private:
  RunRequest request_;
  c10::Device device_{c10::kCPU};
  std::optional<LoadedModel> model_;
  ServedModelInfo info_;
  double sample_ = 0;
  std::string model_id_;
};

}  // namespace

std::string device_description(int cuda_index) { return cuda_device_name(cuda_index); }

std::optional<std::pair<int, int>> cuda_compute_capability(int cuda_index) {
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR (cuda.h).
  constexpr int kMajor = 75, kMinor = 76;
  const CudaDriver* cuda = cuda_driver();
  int device = 0, major = 0, minor = 0;
  if (cuda == nullptr || cuda->attribute == nullptr || cuda->get(&device, cuda_index) != 0 ||
      cuda->attribute(&major, kMajor, device) != 0 || cuda->attribute(&minor, kMinor, device) != 0) {
    return std::nullopt;
  }
  return std::make_pair(major, minor);
}

std::unique_ptr<ServedModel> open_served_model(const ServeModelRequest& request) {
  return std::make_unique<LibtorchServedModel>(request);
}

RunReport run_module(const RunRequest& request) {
  torch::NoGradGuard no_grad;
  RunReport report;
  report.libtorch_version = TORCH_VERSION;
  const std::string& file = request.display_name;

  if (request.api_usage) install_api_usage_logger();
  load_libraries(request.libraries);
  const c10::Device device = parse_device(request.device, file);
  report.device = device.str();
  report.device_name = device.is_cuda() ? cuda_device_name(device.index()) : "CPU";
  if (request.threads > 0) at::set_num_threads(request.threads);
  report.threads = at::get_num_threads();

  LoadedModel model(request, device);
  model.select(request.method);
  report.method = request.method;
  report.schema = model.signature();
  if (request.lite) report.notes.push_back("run by the lite interpreter (_load_for_mobile), as on a phone");

  const auto phase = [&request](const std::string& doing) {
    if (request.on_phase) request.on_phase(doing);
  };
  std::vector<c10::IValue> args;
  std::vector<std::pair<std::string, c10::ScalarType>> input_dtypes;  // floating tensor inputs, for a dtype mismatch
  {
    phase(kPreparingInputs);
    Arguments built = torch_call(file, "make the inputs", [&] { return build_arguments(model, request, 0); });
    for (size_t i = 0; i < built.values.size(); ++i) describe(built.values[i], built.names[i], 0, report.inputs);
    for (size_t i = 0; i < built.given && i < built.values.size(); ++i) {
      const c10::IValue& v = built.values[i];
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point()) {
        input_dtypes.emplace_back(built.names[i], v.toTensor().scalar_type());
      }
    }
    if (request.save_inputs != SaveFormat::None) {
      report.saved_inputs = serialize(c10::ivalue::Tuple::create(built.values), request.save_inputs, "inputs", file);
    }
    for (c10::IValue& v : built.values) args.push_back(to_device(v, device));
    phase("");
  }

  const std::string doing = "run " + request.method;
  const Clock::time_point t0 = Clock::now();
  c10::IValue output;
  try {
    output = torch_call(file, doing, [&] {
      c10::IValue out = model.call(args);
      synchronize(device);
      return out;
    });
  } catch (const Error& e) {
    throw with_dtype_hint(e, model, input_dtypes);
  }
  report.first_call_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  describe(output, "out", 0, report.outputs);
  if (request.expect) report.checks = compare_outputs(output, request);
  if (request.save_outputs != SaveFormat::None) report.saved_outputs = serialize(output, request.save_outputs, "outputs", file);

  const bool timed = request.iterations > 0 || request.duration_s > 0;
  if (timed && request.batch_sizes.empty()) {
    report.timings.push_back(TimedBatch{
        0, torch_call(file, doing, [&] {
          return time_calls([&] { model.call(args); }, device, request, 0, &report.profile);
        })});
  }
  for (int64_t batch : request.batch_sizes) {
    std::vector<c10::IValue> batch_args;
    phase(kPreparingInputs);
    Arguments built = torch_call(file, "make the inputs", [&] { return build_arguments(model, request, batch); });
    for (c10::IValue& v : built.values) batch_args.push_back(to_device(v, device));
    phase("");
    report.timings.push_back(
        TimedBatch{batch, torch_call(file, doing + " with batch size " + std::to_string(batch),
                                     [&] { return time_calls([&] { model.call(batch_args); }, device, request, batch); })});
  }
  if (request.api_usage) report.api_usage = api_usage_keys();
  return report;
}

}  // namespace tsarchive::torch_layer
