// run on a .pt2, the core's part (core/inputs/aoti_model.h): which AOTInductor model
// runs, on which device, and the package's own sample inputs, from packages
// PyTorch 2.13 wrote (testdata/pt2/, testdata/pt2/run/). The runs themselves
// are compared with Python's aoti_load_package in tests/pytorch/check_pt2_run.py.
#include <catch2/catch.hpp>

#include <map>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/inputs/aoti_model.h"
#include "core/inputs/input_values.h"
#include "format/byte_source.h"
#include "helpers.h"

using namespace tsarchive;

namespace {

// A target by field, not by position: Pt2RunTarget grows.
Pt2RunTarget aoti_target(const std::string& device, std::map<std::string, std::string> metadata) {
  Pt2RunTarget target;
  target.model = "model";
  target.device = device;
  target.metadata = std::move(metadata);
  return target;
}

struct Opened {
  explicit Opened(const std::string& name) : archive(open_file_source(testdata(name))), contents(read_pt2(archive)) {}
  TorchArchive archive;
  Pt2Contents contents;
};

}  // namespace

TEST_CASE("run picks a .pt2's AOTInductor model and refuses a program without one", "[pt2][run]") {
  const Opened aoti("pt2/mlp_dynamic_aoti.pt2");
  const Pt2RunTarget target = select_aoti_model(aoti.contents, "", "p.pt2");
  CHECK(target.model == "model");
  CHECK(target.device == "cpu");
  CHECK(select_aoti_model(aoti.contents, "model", "p.pt2").model == "model");

  const Error other = error_of([&] { select_aoti_model(aoti.contents, "other", "p.pt2"); });
  CHECK(other.kind() == ErrorKind::Usage);
  CHECK(std::string(other.what()).find("no AOTInductor model 'other'") != std::string::npos);
  CHECK(other.hint() == "its models are: model");

  const Opened program("pt2/mlp_dynamic.pt2");
  const Error uncompiled = error_of([&] { select_aoti_model(program.contents, "", "m.pt2"); });
  CHECK(uncompiled.kind() == ErrorKind::BadInput);
  CHECK(std::string(uncompiled.what()).find("without compiled artifacts") != std::string::npos);
  CHECK(uncompiled.hint().find("torch._inductor.aoti_compile_and_package") != std::string::npos);
  CHECK(uncompiled.file() == "m.pt2");
}

TEST_CASE("run refuses a device the AOTInductor model was not compiled for", "[pt2][run]") {
  const Pt2RunTarget cpu = aoti_target("cpu", {});
  CHECK_NOTHROW(check_aoti_device(cpu, "cpu", "p.pt2"));
  const Error e = error_of([&] { check_aoti_device(cpu, "cuda:1", "p.pt2"); });
  CHECK(e.kind() == ErrorKind::Usage);
  CHECK(std::string(e.what()) == "AOTInductor model 'model' was compiled for cpu, not cuda");
  CHECK(e.file() == "p.pt2");
  CHECK(e.hint().find("--device cpu") != std::string::npos);
  CHECK_NOTHROW(check_aoti_device(aoti_target("cuda", {}), "cuda:1", "p.pt2"));
}

TEST_CASE("run --sample-inputs reads the package's (args, kwargs), kwargs in the program's order", "[pt2][run]") {
  const nlohmann::json expected = nlohmann::json::parse(slurp(testdata("pt2/run/expected.json")))["files"]["affine_sample_aoti.pt2"];
  const Opened pkg("pt2/run/affine_sample_aoti.pt2");
  InputBudget budget;
  const HostValue inputs = read_pt2_sample_inputs(pkg.archive, pkg.contents, "model", "a.pt2", budget);
  CHECK(inputs.kind == HostValue::Kind::List);
  CHECK(inputs.spreads);
  REQUIRE(inputs.items.size() == 2);  // x (an arg), then bias (a kwarg)
  CHECK(inputs.items[0].kind == HostValue::Kind::Tensor);
  CHECK(inputs.items[0].tensor.shape == expected["sample_args"][0].get<std::vector<int64_t>>());
  CHECK(inputs.items[1].tensor.shape == expected["sample_kwargs"]["bias"].get<std::vector<int64_t>>());
  CHECK(inputs.items[0].tensor.dtype == "float32");
  CHECK(inputs.items[0].origin == "data/sample_inputs/model.pt");

  // torch.export.save's programs carry them too (no compiled model to run them with).
  const Opened program("pt2/mlp_dynamic.pt2");
  const HostValue x = read_pt2_sample_inputs(program.archive, program.contents, "model", "m.pt2", budget);
  REQUIRE(x.items.size() == 1);
  CHECK(x.items[0].tensor.shape == std::vector<int64_t>{2, 4});

  // aoti_compile_and_package writes none.
  const Opened aoti("pt2/mlp_dynamic_aoti.pt2");
  const Error e = error_of([&] { read_pt2_sample_inputs(aoti.archive, aoti.contents, "model", "p.pt2", budget); });
  CHECK(e.kind() == ErrorKind::Usage);
  CHECK(std::string(e.what()).find("no sample inputs") != std::string::npos);
  CHECK(e.hint().find("package_pt2") != std::string::npos);
}

TEST_CASE("run --sample-inputs holds the package's inputs to the input budget, as --input", "[pt2][run]") {
  // The package's author chose them: they take from the user's budget (half of --memory-limit).
  const Opened pkg("pt2/run/affine_sample_aoti.pt2");
  InputBudget tiny(16, "half of --memory-limit 32 B", "raise --memory-limit");
  const Error e = error_of([&] { read_pt2_sample_inputs(pkg.archive, pkg.contents, "model", "a.pt2", tiny); });
  CHECK(e.kind() == ErrorKind::BadInput);
  CHECK(e.file() == "a.pt2");
  CHECK_THAT(e.what(), Catch::StartsWith("data/sample_inputs/model.pt") &&
                           Catch::Contains("that inputs may take in memory (half of --memory-limit 32 B)"));
}

TEST_CASE("run refuses an AOTInductor model compiled for another platform, machine or CPU", "[pt2][run]") {
  const AotiHost avx2_host{"linux", "x86_64", {"avx2", "fma"}};
  const auto target = [](std::map<std::string, std::string> metadata) {
    return aoti_target("cpu", std::move(metadata));
  };
  // What testdata's portable packages record, and what a package compiled on
  // this kind of machine records.
  CHECK(aoti_host_mismatch(
            target({{"AOTI_PLATFORM", "linux"}, {"AOTI_MACHINE", "x86_64"}, {"AOTI_CPU_ISA", "INVALID_VEC_ISA"}}),
            avx2_host) == "");
  CHECK(aoti_host_mismatch(target({{"AOTI_MACHINE", "x86_64"}, {"AOTI_CPU_ISA", "AVX2"}}), avx2_host) == "");
  CHECK(aoti_host_mismatch(target({}), avx2_host) == "");
  CHECK(aoti_host_mismatch(target({{"AOTI_CPU_ISA", "AMX_TILE"}}), avx2_host) == "");  // not known: no reason

  CHECK(aoti_host_mismatch(target({{"AOTI_MACHINE", "x86_64"}, {"AOTI_CPU_ISA", "AVX512"}}), avx2_host) ==
        "its code was compiled for AVX512 (AOTI_CPU_ISA), and this CPU lacks avx512f");
  CHECK(aoti_host_mismatch(target({{"AOTI_CPU_ISA", "AVX2"}}), AotiHost{"linux", "x86_64", {"avx2"}}) ==
        "its code was compiled for AVX2 (AOTI_CPU_ISA), and this CPU lacks fma");
  CHECK(aoti_host_mismatch(target({{"AOTI_MACHINE", "aarch64"}}), avx2_host) ==
        "it was compiled for aarch64 (AOTI_MACHINE), and this machine is x86_64");
  CHECK(aoti_host_mismatch(target({{"AOTI_PLATFORM", "darwin"}}), avx2_host) ==
        "it was compiled for darwin (AOTI_PLATFORM), and this is linux");

  // The package testdata holds runs here: its metadata reaches the target.
  const Opened aoti("pt2/mlp_dynamic_aoti.pt2");
  const Pt2RunTarget package = select_aoti_model(aoti.contents, "", "p.pt2");
  CHECK(package.metadata.at("AOTI_MACHINE") == "x86_64");
  if (this_aoti_host().machine == "x86_64") CHECK_NOTHROW(check_aoti_host(package, "p.pt2"));
  Pt2RunTarget foreign = package;
  foreign.metadata["AOTI_MACHINE"] = "riscv64";
  const Error e = error_of([&] { check_aoti_host(foreign, "p.pt2"); });
  CHECK(e.kind() == ErrorKind::BadInput);
  CHECK(std::string(e.what()) == "AOTInductor model 'model' cannot run on this machine: it was compiled for riscv64 "
                                 "(AOTI_MACHINE), and this machine is " + this_aoti_host().machine);
  CHECK(e.hint().find("cpp.march") != std::string::npos);
}

TEST_CASE("run refuses a CUDA AOTInductor model whose kernels this GPU or libtorch cannot run", "[pt2][run]") {
  // AOTI_COMPUTE_CAPABILITY is major * 10 + minor, as a package compiled on an H100 records it ("90").
  Pt2RunTarget h100 = aoti_target("cuda", {{"AOTI_DEVICE_KEY", "cuda"}, {"AOTI_COMPUTE_CAPABILITY", "90"}});
  CHECK(aoti_gpu_mismatch(h100, 9, 0) == "");
  CHECK(aoti_gpu_mismatch(h100, 8, 0) ==
        "its GPU kernels were compiled for compute capability 9.0 (AOTI_COMPUTE_CAPABILITY 90), and this GPU has 8.0");
  CHECK(aoti_gpu_mismatch(h100, 10, 0) ==
        "its GPU kernels are .cubin files for compute capability 9.0 (AOTI_COMPUTE_CAPABILITY 90) without PTX, which a "
        "GPU of another family (10.0) cannot run");
  Pt2RunTarget a100 = h100;
  a100.metadata["AOTI_COMPUTE_CAPABILITY"] = "80";
  CHECK(aoti_gpu_mismatch(a100, 8, 6) == "");  // a .cubin runs on a newer minor of its family
  CHECK(aoti_gpu_mismatch(aoti_target("cuda", {{"AOTI_COMPUTE_CAPABILITY", "86"}}), 8, 0) != "");
  a100.ptx = true;
  CHECK(aoti_gpu_mismatch(a100, 9, 0) == "");  // PTX is compiled for the newer GPU by the driver
  // A CPU package records "", a ROCm one its gfx name: no reason here.
  CHECK(aoti_gpu_mismatch(aoti_target("cpu", {{"AOTI_COMPUTE_CAPABILITY", ""}}), 8, 0) == "");
  CHECK(aoti_gpu_mismatch(aoti_target("cuda", {{"AOTI_COMPUTE_CAPABILITY", "gfx90a"}}), 8, 0) == "");
  CHECK(aoti_gpu_mismatch(aoti_target("cuda", {}), 8, 0) == "");

  CHECK(aoti_torch_mismatch("2.11.0+cu130", 2, 13) == "");
  CHECK(aoti_torch_mismatch("2.13.0", 2, 13) == "");
  CHECK(aoti_torch_mismatch("", 2, 13) == "");
  CHECK(aoti_torch_mismatch("nightly", 2, 13) == "");
  CHECK(aoti_torch_mismatch("2.14.1+cu130", 2, 13) ==
        "it was exported by PyTorch 2.14.1+cu130, newer than this libtorch (2.13), whose compiled code may call "
        "functions this one lacks");

  // One line before libtorch loads the package: the GPU's reason first, then the version's.
  h100.torch_version = "2.14.0";
  const Error gpu = error_of([&] { check_aoti_runtime(h100, 2, 13, 8, 0, "r.pt2"); });
  CHECK(gpu.kind() == ErrorKind::BadInput);
  CHECK(gpu.file() == "r.pt2");
  CHECK(std::string(gpu.what()).rfind("AOTInductor model 'model' cannot run here: its GPU kernels were compiled", 0) == 0);
  CHECK(gpu.hint().find("aoti_compile_and_package") != std::string::npos);
  const Error version = error_of([&] { check_aoti_runtime(h100, 2, 13, -1, -1, "r.pt2"); });
  CHECK(std::string(version.what()).find("exported by PyTorch 2.14.0") != std::string::npos);
  h100.torch_version = "2.11.0";
  CHECK_NOTHROW(check_aoti_runtime(h100, 2, 13, 9, 0, "r.pt2"));

  // The CPU package testdata holds records no capability and no PTX: nothing to refuse.
  const Opened aoti("pt2/mlp_dynamic_aoti.pt2");
  const Pt2RunTarget package = select_aoti_model(aoti.contents, "", "p.pt2");
  CHECK_FALSE(package.ptx);
  CHECK_NOTHROW(check_aoti_runtime(package, 2, 13, -1, -1, "p.pt2"));
}
