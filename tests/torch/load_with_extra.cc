// libtorch reads what `tsarchive extra` wrote.
//
//   tsarchive_load_check EDITED ORIGINAL [NAME=VALUE]...
//
// Loads EDITED with torch::jit::load and an ExtraFilesMap holding every NAME,
// and checks each value read back; then checks that every parameter and
// buffer is bitwise equal to ORIGINAL's. Exit 0 when all hold, 1 otherwise.
#include <torch/script.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " EDITED ORIGINAL [NAME=VALUE]...\n";
    return 2;
  }
  torch::NoGradGuard no_grad;
  torch::jit::ExtraFilesMap extra;
  std::map<std::string, std::string> want;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    want[arg.substr(0, eq)] = arg.substr(eq + 1);
    extra[arg.substr(0, eq)] = "";
  }
  int failures = 0;
  torch::jit::Module edited = torch::jit::load(argv[1], c10::nullopt, extra);
  torch::jit::Module original = torch::jit::load(argv[2]);
  for (const auto& [name, value] : want) {
    if (extra[name] != value) {
      std::cerr << "extra '" << name << "': read '" << extra[name] << "', want '" << value << "'\n";
      ++failures;
    }
  }
  auto compare = [&](auto edited_list, auto original_list, const char* what) {
    std::map<std::string, at::Tensor> by_name;
    for (const auto& item : original_list) by_name[item.name] = item.value;
    size_t seen = 0;
    for (const auto& item : edited_list) {
      ++seen;
      const auto it = by_name.find(item.name);
      const bool same = it != by_name.end() && item.value.dtype() == it->second.dtype() &&
                        item.value.sizes() == it->second.sizes() && torch::equal(item.value, it->second);
      if (!same) {
        std::cerr << what << " '" << item.name << "' differs from the original\n";
        ++failures;
      }
    }
    if (seen != by_name.size()) {
      std::cerr << what << " count differs: " << seen << " vs " << by_name.size() << "\n";
      ++failures;
    }
  };
  compare(edited.named_parameters(), original.named_parameters(), "parameter");
  compare(edited.named_buffers(), original.named_buffers(), "buffer");
  std::cout << (failures == 0 ? "ok" : "FAILED") << ": " << argv[1] << " (" << want.size() << " extra files)\n";
  return failures == 0 ? 0 : 1;
}
