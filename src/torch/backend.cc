// The torch layer: the only translation units that include libtorch headers.
// Each costs ~20 s and ~1 GB to compile, so keep them few and narrow.
#include <link.h>
#include <limits.h>
#include <stdlib.h>

#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/version.h>

#include "export_hook.h"
#include "jit_module.h"
#include "libtorch_warnings.h"
#include "run_module.h"
#include "torch_errors.h"
#include "base/error.h"
#include "core/provenance/producer_info.h"
#include "contract/torch_backend.h"

namespace tsarchive {
namespace {

using torch_layer::torch_call;

torch::jit::ExtraFilesMap wanted_extra_files(const std::vector<std::string>& names) {
  torch::jit::ExtraFilesMap files;
  for (const std::string& name : names) files[name] = "";
  return files;
}

// Every parameter and buffer by qualified name.
std::map<std::string, torch::Tensor> named_state(const torch::jit::Module& module) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) state.emplace("parameter " + p.name, p.value);
  for (const auto& b : module.named_buffers(/*recurse=*/true)) state.emplace("buffer " + b.name, b.value);
  return state;
}

// The user's path: errors never name /proc/self/fd/N or the staging folder.
const std::string& shown(const ResaveRequest& request) {
  return request.display_name.empty() ? request.input : request.display_name;
}

// The real path of the loaded libtorch_cpu.so: which libtorch this process
// runs (Debian's, a wheel's, one CMAKE_PREFIX_PATH named) is decided by the
// loader, not by what the build saw.
std::string loaded_libtorch_path() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const size_t slash = name.rfind('/');
        if (name.compare(slash == std::string::npos ? 0 : slash + 1, 15, "libtorch_cpu.so") != 0) return 0;
        char real[PATH_MAX];
        *static_cast<std::string*>(data) = ::realpath(name.c_str(), real) != nullptr ? real : name;
        return 1;
      },
      &found);
  return found;
}

class LibtorchBackend final : public TorchBackend {
 public:
  TorchRuntimeInfo runtime_info() const override {
    TorchRuntimeInfo info;
    info.libtorch_version = TORCH_VERSION;
    info.library_path = loaded_libtorch_path();
#ifdef TSARCHIVE_TORCH_HAS_CUDA
    info.cuda_built = true;
    info.cuda_device_count = static_cast<int>(torch::cuda::device_count());
    for (int i = 0; i < info.cuda_device_count; ++i) info.cuda_devices.push_back(torch_layer::device_description(i));
#endif
    return info;
  }

  void load(const std::string& path, const std::string& display_name) override {
    torch::NoGradGuard no_grad;
    torch_call(display_name, "load the module", [&] { return torch::jit::load(path, torch::kCPU); });
  }

  RunReport run(const RunRequest& request) override {
    return request.aoti_model.empty() ? torch_layer::run_module(request) : torch_layer::run_aoti_package(request);
  }
  ConvertReport convert(const ConvertRequest& request) override { return torch_layer::convert_module(request); }
  MethodGraph graph(const GraphRequest& request) override { return torch_layer::graph_of(request); }
  OpsReport operators(const GraphRequest& request) override { return torch_layer::operators_of(request); }
  std::unique_ptr<ServedModel> open_served(const ServeModelRequest& request) override {
    return torch_layer::open_served_model(request);
  }

  // One load of the original serves both the save and the comparison.
  void resave_with_stamp(const ResaveRequest& request) override {
    torch::NoGradGuard no_grad;
    torch::jit::ExtraFilesMap extra = wanted_extra_files(request.extra_names);
    torch::jit::Module module =
        torch_call(shown(request), "load the module", [&] { return torch::jit::load(request.input, torch::kCPU, extra); });
    // No stamp: the archive's producer_info.json is its producer's own, and
    // passes through `extra` like any extra file (the stamp goes in beside it).
    if (!request.stamp.empty()) torch_layer::install_stamp_hook([&request](const std::string&) { return request.stamp; });
    try {
      torch_call(shown(request), "save the module", [&] {
        module.save(request.output, extra);
        return 0;
      });
    } catch (...) {
      torch_layer::remove_stamp_hook();
      throw;
    }
    torch_layer::remove_stamp_hook();
    check_copy(request, module, extra);
  }

 private:
  static void check_copy(const ResaveRequest& request, const torch::jit::Module& original,
                         torch::jit::ExtraFilesMap& original_extra) {
    torch::jit::ExtraFilesMap copy_extra = wanted_extra_files(request.extra_names);
    if (!request.stamp.empty()) copy_extra[kStampName] = "";
    const torch::jit::Module copy = torch_call(shown(request), "load the re-saved module", [&] {
      return torch::jit::load(request.output, torch::kCPU, copy_extra);
    });
    const auto fail = [&](const std::string& what) {
      throw Error(ErrorKind::CheckFailed, "the re-saved archive differs from the original: " + what, shown(request),
                  "nothing was written; use --keep-bytes to add the stamp without re-saving");
    };
    const auto a = named_state(original), b = named_state(copy);
    for (const auto& [name, tensor] : a) {
      const auto it = b.find(name);
      if (it == b.end()) fail(name + " is missing");
      const torch::Tensor& other = it->second;
      if (other.scalar_type() != tensor.scalar_type() || other.sizes() != tensor.sizes()) fail(name + " changed shape or dtype");
      if (!torch::equal(other, tensor)) fail(name + " changed value");
    }
    if (a.size() != b.size()) fail("it has " + std::to_string(b.size() - a.size()) + " more parameters or buffers");
    for (const std::string& name : request.extra_names) {
      if (copy_extra[name] != original_extra[name]) fail("extra/" + name + " changed");
    }
    if (!request.stamp.empty() && copy_extra[kStampName] != request.stamp) fail("extra/" + std::string(kStampName) + " is not the stamp");
  }
};

}  // namespace
}  // namespace tsarchive

extern "C" __attribute__((visibility("default"))) tsarchive::TorchBackend* tsarchive_torch_backend_v7() {
  static tsarchive::LibtorchBackend backend;
  tsarchive::torch_layer::install_warning_notes();
  return &backend;
}
