// Self-checking archives: `tsarchive run --record` stores a run's inputs and
// outputs in the archive's extra/ files, and `run --check` replays them and
// compares. Three extra files, written through the alignment-keeping extra/
// writer (every other record stays byte-identical):
//   extra/tsarchive/check.json         what was run and how to compare (below)
//   extra/tsarchive/check_inputs.pt    torch.save format: a tuple of the arguments
//   extra/tsarchive/check_outputs.pt   torch.save format: what the method returned
// check.json (canonical JSON, sorted keys):
//   {"_type": "https://tsarchive.dev/run-check/v1", "method": "forward",
//    "atol": 1e-05, "rtol": 0.001, "tolerances": {"out[1]": {"atol":..,"rtol":..}},
//    "device": "cpu", "libtorch": "1.13.0", "producer": "tsarchive 0.1.0",
//    "createdAt": "2026-11-21T10:00:00Z", "inputs": ["x: Tensor float32 [2, 8]"],
//    "outputs": ["out: Tensor float32 [2, 3]"]}
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/run.h"

namespace tsarchive {

inline constexpr const char* kRunCheckName = "tsarchive/check.json";
inline constexpr const char* kRunCheckInputsName = "tsarchive/check_inputs.pt";
inline constexpr const char* kRunCheckOutputsName = "tsarchive/check_outputs.pt";
inline constexpr const char* kRunCheckType = "https://tsarchive.dev/run-check/v1";

struct RunCheck {
  std::string method = "forward";
  Tolerance tolerance;
  std::map<std::string, Tolerance> tolerance_by_path;
  std::string device;
  std::string libtorch;
  std::string producer;
  std::string created_at;
  std::vector<std::string> inputs;   // one line per input, for people
  std::vector<std::string> outputs;  // one line per output leaf
};

std::string render_run_check(const RunCheck& check);
// Error(BadInput) naming `file` when the JSON is not a run check this tool reads.
RunCheck parse_run_check(const std::string& json, const std::string& file);

// "x: Tensor float32 [2, 8]", "scale: float 2.5".
std::string value_line(const ValueSummary& value);

}  // namespace tsarchive
