// tsarchive_test::add_one(Tensor x) -> Tensor: x + 1. A model that calls it
// loads only where this library is loaded first (torch.ops.load_library in
// Python, `tsarchive run --load-library` for the CLI).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace {

at::Tensor add_one(const at::Tensor& x) { return x.add(1); }

}  // namespace

TORCH_LIBRARY(tsarchive_test, m) { m.def("add_one(Tensor x) -> Tensor", add_one); }
