// `run`'s picture outputs: --save-outputs FILE.png[:OPTIONS] and --top K
// [--labels extra:NAME|FILE], over the serialized outputs the worker returns
// (core/inputs/image.h does the work).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "contract/run.h"
#include "core/inputs/image.h"
#include "format/archive.h"

namespace tsarchive {

struct RunImageOptions {
  std::string save_outputs;  // --save-outputs, when it names a .png
  int top = 0;               // --top K
  std::string labels;        // --labels extra:NAME or a file
};

// The serialized outputs those options read: SaveFormat::Pt unless the
// outputs were already asked as something else (`current`).
SaveFormat image_outputs_format(const RunImageOptions& opts, SaveFormat current);

struct TopReport {
  std::string labels_from;  // "extra/labels.json", a file, or "" (no labels)
  std::vector<TopClass> classes;
};

// After the run: writes the PNG (atomically) and computes the top k.
// Error(BadInput) when the outputs are not a picture / one row of scores.
std::optional<TopReport> finish_image_outputs(const RunImageOptions& opts, const RunReport& report, SaveFormat format,
                                              const TorchArchive& archive);

}  // namespace tsarchive
