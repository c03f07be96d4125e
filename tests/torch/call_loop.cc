// The per-call floor of a C++ program that links libtorch: bench/run.sh's
// third column beside `tsarchive run --iters` and Python's loop.
//
//   tsarchive_call_loop MODEL SHAPE DEVICE THREADS WARMUP ITERS
//
// Loads MODEL with torch::jit::load onto DEVICE (cpu, cuda, cuda:N), sets the
// intra-op threads, makes one random float input of SHAPE (e.g. 1x3x224x224)
// on the device, then runs the loop both other sides run: WARMUP calls, then
// ITERS calls of forward under NoGradGuard, each ended by a device
// synchronisation on CUDA and timed with a steady clock. Prints
// {"p50_ms": P, "mean_ms": M} on stdout. No sandbox, no worker, no checks:
// where `tsarchive run` is slower than this, the time is tsarchive's; where
// Python is faster than this, it is not.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, 'x');) dims.push_back(std::stoll(part));
  return dims;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: " << argv[0] << " MODEL SHAPE DEVICE THREADS WARMUP ITERS\n";
    return 2;
  }
  try {
    const c10::Device device(argv[3]);
    const int threads = std::stoi(argv[4]);
    const int warmup = std::stoi(argv[5]);
    const int iters = std::max(1, std::stoi(argv[6]));
    if (threads > 0) at::set_num_threads(threads);
    torch::NoGradGuard no_grad;
    torch::jit::Module module = torch::jit::load(argv[1], device);
    module.eval();
    std::vector<c10::IValue> args{torch::randn(parse_shape(argv[2]), torch::TensorOptions().device(device))};
    const auto sync = [&] {
      if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : 0);
    };
    for (int i = 0; i < warmup; ++i) module.forward(args);
    sync();
    std::vector<double> ms;
    ms.reserve(iters);
    for (int i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      module.forward(args);
      sync();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
    std::sort(ms.begin(), ms.end());
    std::printf("{\"p50_ms\": %.6f, \"mean_ms\": %.6f}\n", ms[ms.size() / 2], mean);
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << argv[0] << ": " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
}
