// A torch.package archive (torch.package.PackageExporter) as data, and what
// loading it would run.
//
// PackageExporter writes, under one top folder: .data/version,
// .data/extern_modules (the modules the package takes from the loading
// process, one a line), .data/python_version, .data/<n>.storage (tensors of its
// pickles), .data/ts_code/ (TorchScript modules inside it), and the package's
// own files by their package paths: Python modules (models/model.py) and
// resources, among them the pickles save_pickle wrote (any name). It has no
// data.pkl and no constants.pkl: torch.load fails locating data.pkl and
// torch.jit.load constants.pkl (PyTorch 1.13 and 2.13 alike).
// PackageImporter.load_pickle unpickles with an importer that imports the
// package's modules from the archive, which runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/inspect/load_safety.h"
#include "format/archive.h"

namespace tsarchive {

struct TorchPackageInfo {
  std::vector<std::string> modules;         // "models.model_simple" (from models/model_simple.py), archive order
  std::vector<std::string> extern_modules;  // as .data/extern_modules lists them
  std::vector<std::string> pickles;         // resources that start as a pickle: "objects/model.pkl"
  std::vector<std::string> resources;       // the package's other files
  std::string python_version;               // .data/python_version, "" when absent
  uint64_t storages = 0;                    // .data/<n>.storage records
  uint64_t torchscript = 0;                 // TorchScript modules (.data/ts_code/<n>/data.pkl)
};

// Reads a TorchPackage archive's listing (bounded; names as the archive holds them).
TorchPackageInfo read_torch_package(const TorchArchive& archive);

// "models/model_simple.py" -> "models.model_simple", "pkg/__init__.py" -> "pkg".
std::string package_module_name(const std::string& record);

// What each loader would do with it: PackageImporter imports and runs its
// modules (a dangerous finding naming them); torch.load and torch.jit.load refuse it.
LoadSafety assess_torch_package(const TorchArchive& archive, const LoadSafetyOptions& options);

// For an archive that another loader reads too (a torch.save file with
// .data/extern_modules, all PackageImporter needs): adds PackageImporter's row
// and its dangerous finding to that loader's verdict.
void add_package_importer_view(const TorchArchive& archive, const LoadSafetyOptions& options, LoadSafety& verdict);

}  // namespace tsarchive
