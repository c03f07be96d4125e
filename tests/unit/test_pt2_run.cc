// run on a .pt2, the core's part (core/pt2_run.h): which AOTInductor model
// runs, on which device, and the package's own sample inputs, from packages
// PyTorch 2.13 wrote (testdata/pt2/, testdata/pt2/run/). The runs themselves
// are compared with Python's aoti_load_package in tests/pytorch/check_pt2_run.py.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/pt2_run.h"
#include "format/byte_source.h"
#include "helpers.h"

using namespace tsarchive;

namespace {

struct Opened {
  explicit Opened(const std::string& name) : archive(open_file_source(testdata(name))), contents(read_pt2(archive)) {}
  TorchArchive archive;
  Pt2Contents contents;
};

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no error");
  return Error(ErrorKind::Internal, "");
}

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
  const Pt2RunTarget cpu{"model", "cpu"};
  CHECK_NOTHROW(check_aoti_device(cpu, "cpu", "p.pt2"));
  const Error e = error_of([&] { check_aoti_device(cpu, "cuda:1", "p.pt2"); });
  CHECK(e.kind() == ErrorKind::Usage);
  CHECK(std::string(e.what()) == "AOTInductor model 'model' was compiled for cpu, not cuda");
  CHECK(e.file() == "p.pt2");
  CHECK(e.hint().find("--device cpu") != std::string::npos);
  CHECK_NOTHROW(check_aoti_device(Pt2RunTarget{"model", "cuda"}, "cuda:1", "p.pt2"));
}

TEST_CASE("run --sample-inputs reads the package's (args, kwargs), kwargs in the program's order", "[pt2][run]") {
  const nlohmann::json expected = nlohmann::json::parse(slurp(testdata("pt2/run/expected.json")))["files"]["affine_sample_aoti.pt2"];
  const Opened pkg("pt2/run/affine_sample_aoti.pt2");
  const HostValue inputs = read_pt2_sample_inputs(pkg.archive, pkg.contents, "model", "a.pt2");
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
  const HostValue x = read_pt2_sample_inputs(program.archive, program.contents, "model", "m.pt2");
  REQUIRE(x.items.size() == 1);
  CHECK(x.items[0].tensor.shape == std::vector<int64_t>{2, 4});

  // aoti_compile_and_package writes none.
  const Opened aoti("pt2/mlp_dynamic_aoti.pt2");
  const Error e = error_of([&] { read_pt2_sample_inputs(aoti.archive, aoti.contents, "model", "p.pt2"); });
  CHECK(e.kind() == ErrorKind::Usage);
  CHECK(std::string(e.what()).find("no sample inputs") != std::string::npos);
  CHECK(e.hint().find("package_pt2") != std::string::npos);
}
