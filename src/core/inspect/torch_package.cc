#include "core/inspect/torch_package.h"

#include <algorithm>

#include "base/error.h"
#include "base/strings.h"

namespace tsarchive {
namespace {

constexpr uint64_t kExternModulesLimit = 1 << 20;

bool package_internal(const std::string& name) { return starts_with(name, ".data/"); }

// A stored record whose first bytes are PROTO 2-5, as pickle.dump writes.
bool starts_as_pickle(const TorchArchive& archive, const Record& r) {
  const ZipEntry& e = *r.entry;
  if (!e.stored() || e.uncompressed_size < 2) return false;
  unsigned char head[2] = {};
  archive.zip().source().read_at(e.data_offset, head, sizeof head);
  return head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

}  // namespace

std::string package_module_name(const std::string& record) {
  std::string name = record.substr(0, record.size() - 3);  // without .py
  if (name == "__init__") return "";
  if (ends_with(name, "/__init__")) name.resize(name.size() - 9);
  for (char& c : name) c = c == '/' ? '.' : c;
  return name;
}

TorchPackageInfo read_torch_package(const TorchArchive& archive) {
  TorchPackageInfo info;
  for (const Record& r : archive.records()) {
    if (package_internal(r.name)) {
      if (starts_with(r.name, ".data/ts_code/") && ends_with(r.name, "/data.pkl")) info.torchscript += 1;
      if (ends_with(r.name, ".storage") && r.name.find('/', 6) == std::string::npos) info.storages += 1;
      continue;
    }
    if (r.name == "byteorder") continue;  // the stream writer's, as in every PyTorch 2.x archive
    if (ends_with(r.name, ".py")) {
      const std::string module = package_module_name(r.name);
      info.modules.push_back(module.empty() ? "(the package root's __init__)" : module);
    } else if (starts_as_pickle(archive, r)) {
      info.pickles.push_back(r.name);
    } else {
      info.resources.push_back(r.name);
    }
  }
  if (const auto text = archive.read_optional(".data/extern_modules", kExternModulesLimit)) {
    size_t begin = 0;
    while (begin < text->size()) {
      size_t end = text->find('\n', begin);
      if (end == std::string::npos) end = text->size();
      if (end > begin) info.extern_modules.push_back(text->substr(begin, end - begin));
      begin = end + 1;
    }
  }
  if (auto version = archive.read_optional(".data/python_version", ReadLimits::kSmall)) {
    while (!version->empty() && (version->back() == '\n' || version->back() == ' ')) version->pop_back();
    info.python_version = *version;
  }
  return info;
}

LoadSafety assess_torch_package(const TorchArchive& archive, const LoadSafetyOptions& options) {
  const TorchPackageInfo package = read_torch_package(archive);
  LoadSafety out;
  out.torch_version = options.torch_version.empty() ? kNewestTorchVersion : options.torch_version;
  out.pickles = package.pickles;
  out.tensor_rebuilding_only = false;
  const std::string externs =
      package.extern_modules.empty() ? std::string() : " and the loading process's " + some_names(package.extern_modules, 8);
  std::string runs;
  if (!package.modules.empty()) {
    runs = "imports and runs the " + std::to_string(package.modules.size()) + " Python module(s) inside when a pickle "
           "names them: " + some_names(package.modules, 8);
  } else {
    runs = "unpickles with Python's pickle, which calls what the pickles name from its extern modules";
  }
  out.loaders.push_back(LoaderVerdict{"torch.package.PackageImporter", "runs code",
                                      "load_pickle " + runs + (package.modules.empty() ? "" : externs)});
  const std::string no_data = "a torch.package archive has no data.pkl (torch.load fails locating it)";
  out.loaders.push_back(LoaderVerdict{"torch.load(weights_only=True)", "refuses", no_data});
  out.loaders.push_back(LoaderVerdict{"torch.load(weights_only=False)", "refuses", no_data});
  out.loaders.push_back(LoaderVerdict{"torch.jit.load", "refuses",
                                      "a torch.package archive has no constants.pkl (torch.jit.load fails locating it)"});
  LoadFinding finding;
  finding.risk = LoadRisk::Dangerous;
  finding.where = "the package";
  finding.what = "torch.package.PackageImporter " + runs;
  finding.category = "code execution";
  out.findings.push_back(std::move(finding));
  return out;
}

void add_package_importer_view(const TorchArchive& archive, const LoadSafetyOptions& options, LoadSafety& verdict) {
  LoadSafety package = assess_torch_package(archive, options);
  verdict.tensor_rebuilding_only = false;
  for (const std::string& p : package.pickles) {
    if (std::find(verdict.pickles.begin(), verdict.pickles.end(), p) == verdict.pickles.end()) verdict.pickles.push_back(p);
  }
  verdict.loaders.push_back(std::move(package.loaders.front()));  // PackageImporter's; the others are the file's own
  LoadFinding finding = std::move(package.findings.front());
  finding.where = ".data/extern_modules";
  finding.what = "makes the file a torch.package as well (PackageImporter needs no more): " + finding.what;
  verdict.findings.push_back(std::move(finding));
}

}  // namespace tsarchive
