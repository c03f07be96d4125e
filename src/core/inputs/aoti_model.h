// A .pt2's AOTInductor model, as `run` needs it and without running it:
// which model of the package runs (data/aotinductor/<model>/), whether its
// compiled code suits this machine (platform, CPU ISA; the GPU and libtorch,
// asked by the torch layer), on which device, and the package's own sample
// inputs (data/sample_inputs/<model>.pt) as run's inputs. The compiled code
// itself is loaded only by the torch layer, in a worker, after the archive
// passed the gate.
#pragma once

#include <map>
#include <set>
#include <string>

#include "contract/host_value.h"
#include "format/archive.h"
#include "format/pt2.h"

namespace tsarchive {

class InputBudget;  // core/inputs/input_values.h

struct Pt2RunTarget {
  std::string model;   // <model> of data/aotinductor/<model>/
  std::string device;  // what it was compiled for (AOTI_DEVICE_KEY): "cpu", "cuda"
  std::map<std::string, std::string> metadata;  // the AOTI_* keys of its *_metadata.json
  // Its GPU kernels include PTX (a .ptx or .fatbin file), which the driver
  // compiles for a newer GPU; plain .cubin files run only on their own
  // architecture's family.
  bool ptx = false;
  // The PyTorch that exported the program of the same name (models/<model>.json's
  // torch_version), where the package holds one: an AOTInductor model's
  // metadata does not record it.
  std::string torch_version;
};

// What an AOTInductor package's metadata is compared with: the values Python's
// torch._inductor.codecache.get_device_information gives on this machine
// (sys.platform, platform.machine()), and the CPU's instruction-set features
// by the names /proc/cpuinfo uses ("avx2", "avx512bw").
struct AotiHost {
  std::string platform;
  std::string machine;
  std::set<std::string> cpu_features;
};
AotiHost this_aoti_host();

// The AOTInductor model `requested` names ("" : "model", or the only one).
// Error(BadInput) for a .pt2 without compiled artifacts (an ExportedProgram:
// what to run it with and how to compile it), Error(Usage) naming the models
// when `requested` is none of them.
Pt2RunTarget select_aoti_model(const Pt2Contents& contents, const std::string& requested, const std::string& file);

// Why the model cannot run on `host`, or "": its AOTI_PLATFORM or AOTI_MACHINE
// is another one, or its AOTI_CPU_ISA (AVX2, AVX512) needs CPU features the
// host lacks, so its code would stop on an illegal instruction. An ISA this
// does not know (or INVALID_VEC_ISA, scalar code) is no reason.
std::string aoti_host_mismatch(const Pt2RunTarget& target, const AotiHost& host);

// Error(BadInput) with aoti_host_mismatch(target, this_aoti_host()), before
// libtorch loads the package's code.
void check_aoti_host(const Pt2RunTarget& target, const std::string& file);

// Why the model's GPU kernels cannot run on a CUDA device of compute
// capability `major`.`minor`, or "": its AOTI_COMPUTE_CAPABILITY (major * 10 +
// minor, as torch.cuda.get_device_capability gives it) is another family, or
// a newer one than the device, or (for .cubin kernels without PTX) a newer
// minor of the same family. Unrecorded or unreadable: no reason.
std::string aoti_gpu_mismatch(const Pt2RunTarget& target, int major, int minor);

// Why a model exported by PyTorch `torch_version` ("2.13.0+cu130") cannot be
// loaded by libtorch `major`.`minor`, or "": a newer PyTorch's compiled code
// calls functions an older libtorch lacks. Unrecorded or unreadable: no reason.
std::string aoti_torch_mismatch(const std::string& torch_version, int major, int minor);

// Error(BadInput) with aoti_gpu_mismatch (for a run on a GPU of capability
// gpu_major.gpu_minor; gpu_major -1: not on a GPU) or aoti_torch_mismatch
// against libtorch torch_major.torch_minor, before libtorch loads the
// package's code (the torch layer asks, knowing both).
void check_aoti_runtime(const Pt2RunTarget& target, int torch_major, int torch_minor, int gpu_major, int gpu_minor,
                        const std::string& file);

// Error(Usage) when --device (cpu, cuda, cuda:N) is not the device the model
// was compiled for.
void check_aoti_device(const Pt2RunTarget& target, const std::string& device, const std::string& file);

// data/sample_inputs/<model>.pt (torch.save of (args, kwargs)) as one input
// list: the args in order, then the kwargs in the order of the program's
// user inputs (models/<model>.json). Error(Usage) when the package has none,
// Error(BadInput) when the record is not a torch.save file of such values,
// or its storages pass `budget`.
HostValue read_pt2_sample_inputs(const TorchArchive& archive, const Pt2Contents& contents, const std::string& model,
                                 const std::string& file, InputBudget& budget);

}  // namespace tsarchive
