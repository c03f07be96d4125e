// Writes input files with libtorch's torch::pickle_save, the writer behind
// `tsarchive run --save-outputs`, so the core's reader is tested on what
// libtorch's jit Pickler really emits (build_tensorlist, build_intlist,
// restore_type_tag), which Python's torch.save never writes.
// Built and run by scripts/make_input_files.py:  pickle_save_inputs OUTDIR
#include <fstream>
#include <iostream>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

namespace {
void write(const std::string& path, const c10::IValue& value) {
  const std::vector<char> bytes = torch::jit::pickle_save(value);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pickle_save_inputs OUTDIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  const at::Tensor a = at::arange(4, at::kFloat).reshape({2, 2});
  const at::Tensor b = at::arange(3, at::kLong) * 10;
  const at::Tensor c = at::arange(6, at::kDouble).reshape({2, 3}).t();  // non-contiguous

  c10::List<at::Tensor> tensors;
  tensors.push_back(a);
  tensors.push_back(b);
  write(dir + "/pickle_save_tensors.pt", tensors);  // List[Tensor]: build_tensorlist

  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("w", c);
  c10::List<int64_t> ints({1, 2, 3});
  write(dir + "/pickle_save_tuple.pt",
        c10::ivalue::Tuple::create({a, ints, dict, c10::IValue(2.5), c10::IValue(true), c10::IValue()}));
  return 0;
}
