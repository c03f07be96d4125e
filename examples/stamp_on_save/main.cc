// stamp_on_save IN.pt OUT.pt: loads a TorchScript module and saves it again.
// The producer-info hook, installed once at start-up, adds
// extra/producer_info.json to OUT.pt without any code at the save itself.
#include <torch/script.h>

#include <iostream>

#include <tsarchive/producer_hook.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: stamp_on_save IN.pt OUT.pt\n";
    return 2;
  }
  tsarchive::install_producer_info_hook({"stamp_on_save", "1.0", {{"team", "examples"}}, /*host=*/false});
  try {
    torch::jit::Module module = torch::jit::load(argv[1]);
    module.save(argv[2]);
  } catch (const c10::Error& e) {
    std::cerr << "stamp_on_save: " << e.what_without_backtrace() << '\n';
    return 1;
  }
  std::cout << "saved " << argv[2] << '\n';
  return 0;
}
