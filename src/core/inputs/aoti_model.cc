#include "core/inputs/aoti_model.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/strings.h"
#include "core/inputs/input_values.h"
#include "format/byte_source.h"

namespace tsarchive {
namespace {

std::string model_names(const Pt2Contents& contents) {
  std::string names;
  for (const Pt2AotiModel& m : contents.aoti) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

// The position of a kwarg among the program's user inputs; past the end when
// the program does not name it.
size_t user_input_position(const Pt2Contents& contents, const std::string& model, const std::string& name) {
  for (const Pt2Program& p : contents.programs) {
    if (p.name != model) continue;
    size_t position = 0;
    for (const Pt2Arg& a : p.inputs) {
      if (a.kind != "user_input") continue;
      if (a.name == name) return position;
      ++position;
    }
  }
  return SIZE_MAX;
}

}  // namespace

Pt2RunTarget select_aoti_model(const Pt2Contents& contents, const std::string& requested, const std::string& file) {
  if (contents.aoti.empty()) {
    const std::string what = contents.programs.empty()
                                 ? "the .pt2 holds no AOTInductor model (no data/aotinductor/<model>/)"
                                 : "the .pt2 is a torch.export program without compiled artifacts (no data/aotinductor/); "
                                   "run executes AOTInductor packages";
    throw_bad_input(what, file,
                    "compile it in Python: torch._inductor.aoti_compile_and_package(torch.export.load(PATH), "
                    "package_path=\"model_aoti.pt2\"), then run that package");
  }
  const std::string name = !requested.empty() ? requested : contents.aoti.size() == 1 ? contents.aoti.front().name : "model";
  for (const Pt2AotiModel& m : contents.aoti) {
    if (m.name != name) continue;
    Pt2RunTarget target{m.name, m.device, m.metadata, false, {}};
    for (const Pt2AotiFile& f : m.files) target.ptx = target.ptx || ends_with(f.name, ".ptx") || ends_with(f.name, ".fatbin");
    for (const Pt2Program& p : contents.programs) {
      if (p.name == m.name) target.torch_version = p.torch_version;
    }
    return target;
  }
  if (requested.empty()) {
    throw Error(ErrorKind::Usage,
                "the package holds " + std::to_string(contents.aoti.size()) + " AOTInductor models and none is named 'model'",
                file, "choose one with --method NAME: " + model_names(contents));
  }
  throw Error(ErrorKind::Usage, "the package has no AOTInductor model '" + requested + "'", file,
              "its models are: " + model_names(contents));
}

AotiHost this_aoti_host() {
  AotiHost host;
#if defined(__linux__)
  host.platform = "linux";
#elif defined(__APPLE__)
  host.platform = "darwin";
#endif
  struct utsname name {};
  if (::uname(&name) == 0) host.machine = name.machine;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // Only the features aoti_host_mismatch asks about.
  const std::pair<const char*, bool> features[] = {
      {"avx2", __builtin_cpu_supports("avx2")},         {"fma", __builtin_cpu_supports("fma")},
      {"avx512f", __builtin_cpu_supports("avx512f")},   {"avx512bw", __builtin_cpu_supports("avx512bw")},
      {"avx512vl", __builtin_cpu_supports("avx512vl")}, {"avx512dq", __builtin_cpu_supports("avx512dq")},
  };
  for (const auto& [feature, present] : features) {
    if (present) host.cpu_features.insert(feature);
  }
#endif
  return host;
}

std::string aoti_host_mismatch(const Pt2RunTarget& target, const AotiHost& host) {
  const auto recorded = [&](const char* key) {
    const auto it = target.metadata.find(key);
    return it == target.metadata.end() ? std::string() : it->second;
  };
  const std::string platform = recorded("AOTI_PLATFORM");
  if (!platform.empty() && !host.platform.empty() && platform != host.platform) {
    return "it was compiled for " + platform + " (AOTI_PLATFORM), and this is " + host.platform;
  }
  const std::string machine = recorded("AOTI_MACHINE");
  if (!machine.empty() && !host.machine.empty() && machine != host.machine) {
    return "it was compiled for " + machine + " (AOTI_MACHINE), and this machine is " + host.machine;
  }
  // The features inductor's VecAVX2 and VecAVX512 compile with.
  static const std::map<std::string, std::vector<std::string>> kIsaFeatures = {
      {"AVX2", {"avx2", "fma"}},
      {"AVX512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}},
  };
  const std::string isa = recorded("AOTI_CPU_ISA");
  const auto needs = kIsaFeatures.find(isa);
  if (needs == kIsaFeatures.end()) return "";
  for (const std::string& feature : needs->second) {
    if (host.cpu_features.count(feature) == 0) {
      return "its code was compiled for " + isa + " (AOTI_CPU_ISA), and this CPU lacks " + feature;
    }
  }
  return "";
}

void check_aoti_host(const Pt2RunTarget& target, const std::string& file) {
  const std::string why = aoti_host_mismatch(target, this_aoti_host());
  if (why.empty()) return;
  throw_bad_input("AOTInductor model '" + target.model + "' cannot run on this machine: " + why, file,
                  "compile it again for this machine with torch._inductor.aoti_compile_and_package "
                  "(inductor_configs={\"cpp.march\": \"x86-64\"} makes code that any x86-64 CPU runs)");
}

namespace {

// The leading "A.B" of a version or capability text as {A, B}; {-1, -1} when it has none.
std::pair<int, int> major_minor(const std::string& text) {
  int major = -1, minor = -1;
  char dot = 0;
  if (std::sscanf(text.c_str(), "%d%c%d", &major, &dot, &minor) != 3 || dot != '.' || major < 0 || minor < 0) return {-1, -1};
  return {major, minor};
}

}  // namespace

std::string aoti_gpu_mismatch(const Pt2RunTarget& target, int major, int minor) {
  const auto it = target.metadata.find("AOTI_COMPUTE_CAPABILITY");
  if (it == target.metadata.end() || it->second.empty() || it->second.size() > 4 ||
      it->second.find_first_not_of("0123456789") != std::string::npos) {
    return "";
  }
  const int recorded = std::stoi(it->second);
  const int built_major = recorded / 10, built_minor = recorded % 10;
  const std::string built = std::to_string(built_major) + "." + std::to_string(built_minor);
  const std::string here = std::to_string(major) + "." + std::to_string(minor);
  const bool older_device = major < built_major || (major == built_major && minor < built_minor);
  if (older_device) {
    return "its GPU kernels were compiled for compute capability " + built + " (AOTI_COMPUTE_CAPABILITY " + it->second +
           "), and this GPU has " + here;
  }
  if (!target.ptx && major != built_major) {
    return "its GPU kernels are .cubin files for compute capability " + built + " (AOTI_COMPUTE_CAPABILITY " + it->second +
           ") without PTX, which a GPU of another family (" + here + ") cannot run";
  }
  return "";
}

std::string aoti_torch_mismatch(const std::string& torch_version, int major, int minor) {
  const auto [built_major, built_minor] = major_minor(torch_version);
  if (built_major < 0) return "";
  if (built_major < major || (built_major == major && built_minor <= minor)) return "";
  return "it was exported by PyTorch " + torch_version + ", newer than this libtorch (" + std::to_string(major) + "." +
         std::to_string(minor) + "), whose compiled code may call functions this one lacks";
}

void check_aoti_runtime(const Pt2RunTarget& target, int torch_major, int torch_minor, int gpu_major, int gpu_minor,
                        const std::string& file) {
  const std::string gpu = gpu_major >= 0 ? aoti_gpu_mismatch(target, gpu_major, gpu_minor) : "";
  const std::string why = !gpu.empty() ? gpu : aoti_torch_mismatch(target.torch_version, torch_major, torch_minor);
  if (why.empty()) return;
  throw_bad_input("AOTInductor model '" + target.model + "' cannot run here: " + why, file,
                  gpu.empty() ? "run it with the PyTorch that exported it, or export and compile it again with this one"
                              : "compile it again on this GPU with torch._inductor.aoti_compile_and_package");
}

void check_aoti_device(const Pt2RunTarget& target, const std::string& device, const std::string& file) {
  const std::string type = device.substr(0, device.find(':'));
  if (target.device.empty() || type == target.device) return;
  throw Error(ErrorKind::Usage, "AOTInductor model '" + target.model + "' was compiled for " + target.device + ", not " + type,
              file,
              target.device == "cpu" || target.device == "cuda"
                  ? "run it with --device " + target.device + ", or compile the program again for " + type
                  : "compile the program again for " + type);
}

HostValue read_pt2_sample_inputs(const TorchArchive& archive, const Pt2Contents& contents, const std::string& model,
                                 const std::string& file, InputBudget& budget) {
  const std::string name = "data/sample_inputs/" + model + ".pt";
  const Record* record = archive.find(name);
  if (record == nullptr) {
    throw Error(ErrorKind::Usage, "the package has no sample inputs for '" + model + "' (no " + name + ")", file,
                "give the inputs with --input; aoti_compile_and_package writes none, "
                "torch.export.pt2_archive._package.package_pt2(..., exported_programs=, aoti_files=) keeps the program's");
  }
  HostValue saved;
  try {
    const uint64_t limit = std::min<uint64_t>(Pt2Limits::kSampleInputs, budget.limit() - budget.used());
    if (record->entry->uncompressed_size > limit) {
      budget.refuse(name + " is " + human_size(record->entry->uncompressed_size), file);
    }
    saved = read_torch_save_value(*make_memory_source(archive.read(*record, limit), name), budget);
  } catch (const Error& e) {
    throw e.with_file(file);
  }
  const bool pair = saved.kind == HostValue::Kind::List && saved.items.size() == 2 &&
                    saved.items[0].kind == HostValue::Kind::List && saved.items[1].kind == HostValue::Kind::Dict;
  if (!pair) {
    throw_bad_input(name + " is not torch.save of (args, kwargs)", file,
                    "the package's sample inputs are damaged; give the inputs with --input");
  }
  HostValue inputs;
  inputs.kind = HostValue::Kind::List;
  inputs.tuple = true;
  inputs.spreads = true;
  inputs.origin = name;
  inputs.items = std::move(saved.items[0].items);
  std::vector<std::pair<std::string, HostValue>> kwargs = std::move(saved.items[1].entries);
  std::stable_sort(kwargs.begin(), kwargs.end(), [&](const auto& a, const auto& b) {
    return user_input_position(contents, model, a.first) < user_input_position(contents, model, b.first);
  });
  for (auto& [key, value] : kwargs) inputs.items.push_back(std::move(value));
  for (HostValue& v : inputs.items) v.origin = name;
  return inputs;
}

}  // namespace tsarchive
