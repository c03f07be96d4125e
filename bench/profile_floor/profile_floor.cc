// libtorch's floor for "always on" sampled operator measurements: the least a
// program can pay for them. It loads a TorchScript model, registers one
// global RecordFunction callback that does nothing, sampled with probability P
// (none with P = 0), and times calls of forward exactly as `tsarchive run`
// does (NoGradGuard, one intra-op thread, warm-up, steady_clock around each
// call). bench/profile.sh sets its numbers beside `run --profile --sample P`.
//
//   profile_floor MODEL SHAPE ITERS P     SHAPE as 1x3x224x224
// Prints "p50_ms mean_ms".
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  std::stringstream in(text);
  for (std::string dim; std::getline(in, dim, 'x');) dims.push_back(std::stoll(dim));
  return dims;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }
void on_end(const at::RecordFunction&, at::ObserverContext*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: profile_floor MODEL SHAPE ITERS P\n");
    return 2;
  }
  const int iters = std::stoi(argv[3]);
  const double p = std::stod(argv[4]);
  torch::NoGradGuard no_grad;
  at::set_num_threads(1);
  torch::jit::Module model = torch::jit::load(argv[1]);
  model.eval();
  const std::vector<c10::IValue> args{torch::randn(parse_shape(argv[2]))};
  for (int i = 0; i < 20; ++i) model.forward(args);
  if (p > 0) at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end).samplingProb(p));
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    model.forward(args);
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  std::printf("%.6f %.6f\n", ms[ms.size() / 2], mean);
  return 0;
}
