// `tsarchive run` on a .pt2's AOTInductor model: libtorch 2.x's
// torch::inductor::AOTIModelPackageLoader extracts data/aotinductor/<model>/
// of the archive the core checked (by its /proc/self/fd path) and dlopen()s
// the compiled .so, in the worker process like every libtorch call. The
// inputs are the core's HostValues flattened to their tensors in order (what
// the compiled code takes: aoti_load_package drops non-tensor leaves the same
// way), the outputs the flat tensors it returns. Descriptions, checks, saved
// copies and timing are run's (values.h, run_module.h).
//
// libtorch 1.13 (Debian's) has no AOTInductor: there this file only says so.
#include <ATen/Parallel.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2 && __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#define TSARCHIVE_TORCH_HAS_AOTI 1
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#endif

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "run_module.h"
#include "torch_errors.h"
#include "values.h"
#include "base/bounded_json.h"
#include "base/error.h"
#include "contract/run.h"
#include "core/inputs/aoti_model.h"
#include "format/byte_source.h"
#include "tsarchive/operator_observer.h"

namespace tsarchive::torch_layer {

#ifndef TSARCHIVE_TORCH_HAS_AOTI

RunReport run_aoti_package(const RunRequest& request) {
  throw Error(ErrorKind::Torch,
              "running a .pt2 (an AOTInductor package) needs tsarchive built against libtorch 2.x; this one links "
              "libtorch " TORCH_VERSION ", which has no AOTInductor",
              request.display_name,
              "build tsarchive against libtorch 2.x (scripts/dev.sh torch2, or CMAKE_PREFIX_PATH=<libtorch 2.x>), or "
              "run the package from Python with torch._inductor.aoti_load_package");
}

#else

namespace {

using Clock = std::chrono::steady_clock;
using torch::inductor::AOTIModelPackageLoader;

std::unique_ptr<AOTIModelPackageLoader> load_package(const RunRequest& request, const c10::Device& device) {
  return torch_call(request.display_name, "load the AOTInductor package", [&] {
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 8
    const c10::DeviceIndex index = device.is_cuda() ? device.index() : -1;
    return std::make_unique<AOTIModelPackageLoader>(request.archive, request.aoti_model, false, 1, index);
#else
    if (device.is_cuda() && device.index() > 0) {
      throw Error(ErrorKind::Usage, "this libtorch (" TORCH_VERSION ") runs AOTInductor packages on the current CUDA device only",
                  request.display_name, "use --device cuda, or build tsarchive against libtorch 2.8 or newer");
    }
    return std::make_unique<AOTIModelPackageLoader>(request.archive, request.aoti_model);
#endif
  });
}

// The compiled code reports a failed call on stderr itself ("Error:
// aoti_torch_cpu_addmm_out(...) API call failed at /tmp/.../wrapper.cpp, line
// 864") before it throws. f() runs with fd 2 sent to a file in memory (a
// memfd: std::tmpfile() would make it in /tmp, which the worker's sandbox
// does not let it write); what
// was written there (64 KiB at most) comes back in `printed`, for the error's
// detail (--verbose) or a note, so that an error stays one line.
template <typename F>
auto with_stderr_captured(F&& f, std::string& printed) {
  std::fflush(stderr);
  std::cerr.flush();
  const int memory = ::memfd_create("aoti-stderr", MFD_CLOEXEC);
  FILE* file = memory >= 0 ? ::fdopen(memory, "w+") : nullptr;
  if (memory >= 0 && file == nullptr) ::close(memory);
  const int saved = file != nullptr ? ::dup(STDERR_FILENO) : -1;
  if (saved < 0 || ::dup2(::fileno(file), STDERR_FILENO) < 0) {
    if (saved >= 0) ::close(saved);
    if (file != nullptr) std::fclose(file);
    return f();  // no capture: the text goes where it would have gone
  }
  const auto restore = [&] {
    std::fflush(stderr);
    std::cerr.flush();
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    std::rewind(file);
    char buf[4096];
    size_t n = 0;
    while (printed.size() < (64u << 10) && (n = std::fread(buf, 1, sizeof buf, file)) > 0) printed.append(buf, n);
    std::fclose(file);
  };
  try {
    auto result = f();
    restore();
    return result;
  } catch (...) {
    restore();
    throw;
  }
}

std::string first_line(const std::string& text) {
  const size_t start = text.find_first_not_of(" \n");
  if (start == std::string::npos) return "";
  return text.substr(start, std::min<size_t>(text.find('\n', start) - start, 300));
}

// Whether the call spec's output tree ("[1, {\"type\": null, ...}]") is a
// single tensor rather than a tuple, list or dict of them.
bool single_output(const std::vector<std::string>& call_spec) {
  if (call_spec.size() < 2) return false;
  const std::optional<nlohmann::json> spec = parse_bounded_json(call_spec[1]);
  if (!spec || !spec->is_array() || spec->size() < 2 || !(*spec)[1].is_object()) return false;
  const nlohmann::json& root = (*spec)[1];
  return root.contains("type") && root["type"].is_null();
}

// What the package's metadata says it needs, against this libtorch and the
// GPU it runs on: Error(BadInput) in one line before its code is loaded. The
// core reads the metadata again from the archive it checked.
void check_before_loading(const RunRequest& request, const c10::Device& device) {
  Pt2RunTarget target;
  try {
    const TorchArchive archive(open_file_source(request.archive));
    target = select_aoti_model(read_pt2(archive), request.aoti_model, request.display_name);
  } catch (const Error& e) {
    throw e.with_file(request.display_name);
  }
  std::optional<std::pair<int, int>> gpu;
  if (device.is_cuda()) gpu = cuda_compute_capability(device.index());
  check_aoti_runtime(target, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, gpu ? gpu->first : -1, gpu ? gpu->second : -1,
                     request.display_name);
}

// The model's tensor inputs, in order; non-tensor leaves are left out with a note.
std::vector<at::Tensor> tensor_inputs(const RunRequest& request, RunReport& report) {
  const std::string& file = request.display_name;
  if (request.inputs.empty()) {
    throw Error(ErrorKind::Usage, "AOTInductor model '" + request.aoti_model + "' needs its input tensors", file,
                "give one --input per tensor input in order (e.g. --input 2x4), or --sample-inputs for the "
                "package's own when it has them");
  }
  seed_generators(request.seed, request.device);  // generated inputs are the same as for a TorchScript run with this seed
  std::vector<c10::IValue> leaves;
  torch_call(file, "make the inputs", [&] {
    for (const HostValue& v : request.inputs) host_leaves(v, leaves);
    return 0;
  });
  std::vector<at::Tensor> tensors;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const c10::IValue& leaf = leaves[i];
    if (leaf.isTensor()) {
      // Compiled code assumes the layout it was exported with: contiguous, as
      // the inputs were before they became views over the files' bytes.
      tensors.push_back(leaf.toTensor().contiguous());
      continue;
    }
    report.notes.push_back("input value " + std::to_string(i) + " (" + leaf.tagKind() +
                           ") was not passed: AOTInductor's compiled code takes tensors only (other values were fixed "
                           "when the program was exported)");
  }
  return tensors;
}

}  // namespace

RunReport run_aoti_package(const RunRequest& request) {
  torch::NoGradGuard no_grad;
  RunReport report;
  report.libtorch_version = TORCH_VERSION;
  const std::string& file = request.display_name;
  if (!request.batch_sizes.empty()) {
    throw Error(ErrorKind::Usage, "--batch-sizes is for TorchScript archives", file,
                "time one input size of an AOTInductor package per run: --input SHAPE --iters N");
  }

  if (request.api_usage) install_api_usage_logger();
  load_libraries(request.libraries);
  const c10::Device device = parse_device(request.device, file);
  report.device = device.str();
  report.device_name = device.is_cuda() ? device_description(device.index()) : "CPU";
  if (request.threads > 0) at::set_num_threads(request.threads);
  report.threads = at::get_num_threads();

  check_before_loading(request, device);

  std::string printed;
  const auto captured = [&](auto&& f) {
    try {
      return with_stderr_captured(f, printed);
    } catch (const Error& e) {
      if (printed.empty()) throw;
      throw e.with_detail(printed + (e.detail().empty() ? "" : "\n" + e.detail()));
    }
  };
  const std::unique_ptr<AOTIModelPackageLoader> loader = captured([&] { return load_package(request, device); });
  const std::vector<std::string> call_spec = torch_call(file, "read the call spec", [&] { return loader->get_call_spec(); });
  const bool single = single_output(call_spec);
  report.method = request.aoti_model;
  report.schema = "AOTInductor model '" + request.aoti_model + "' (data/aotinductor/" + request.aoti_model +
                  "/): tensors in, " + (single ? "one tensor out" : "a tuple of tensors out");
  report.notes.push_back("run by its AOTInductor-compiled code (torch::inductor::AOTIModelPackageLoader, libtorch " TORCH_VERSION ")");

  std::vector<at::Tensor> inputs = tensor_inputs(request, report);
  std::vector<c10::IValue> described(inputs.begin(), inputs.end());
  for (size_t i = 0; i < described.size(); ++i) describe(described[i], "in[" + std::to_string(i) + "]", 0, report.inputs);
  if (request.save_inputs != SaveFormat::None) {
    report.saved_inputs = serialize(c10::ivalue::Tuple::create(described), request.save_inputs, "inputs", file);
  }
  for (at::Tensor& t : inputs) t = t.to(device);

  const std::string doing = "run AOTInductor model '" + request.aoti_model + "'";
  const auto call = [&] {
    std::vector<at::Tensor> out = loader->run(inputs);
    synchronize(device);
    return out;
  };
  const Clock::time_point t0 = Clock::now();
  const std::vector<at::Tensor> outputs = captured([&] { return torch_call(file, doing, call); });
  if (!first_line(printed).empty()) report.notes.push_back("the compiled code wrote to stderr: " + first_line(printed));
  report.first_call_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  c10::IValue output;
  if (single && outputs.size() == 1) {
    output = outputs.front();
  } else {
    output = c10::ivalue::Tuple::create(std::vector<c10::IValue>(outputs.begin(), outputs.end()));
  }
  describe(output, "out", 0, report.outputs);
  if (request.expect) report.checks = compare_outputs(output, request);
  if (request.save_outputs != SaveFormat::None) report.saved_outputs = serialize(output, request.save_outputs, "outputs", file);

  if (request.iterations > 0 || request.duration_s > 0) {
    report.timings.push_back(TimedBatch{
        0, torch_call(file, doing, [&] { return time_calls([&] { call(); }, device, request, 0, &report.profile); })});
  }
  if (request.api_usage) report.api_usage = api_usage_keys();
  return report;
}

#endif

}  // namespace tsarchive::torch_layer
