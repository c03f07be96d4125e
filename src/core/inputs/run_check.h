// Self-checking archives: `tsarchive run --record` stores a run's inputs and
// outputs in the archive's extra/ files, and `run --check` replays them and
// compares. Three extra files, written through the alignment-keeping extra/
// writer (every other record stays byte-identical):
//   extra/tsarchive/check.json         what was run and how to compare (below)
//   extra/tsarchive/check_inputs.pt    torch.save format: a tuple of the arguments
//   extra/tsarchive/check_outputs.pt   torch.save format: what the method returned
// In a .pt2 the last two are check_inputs.pt.b64 and check_outputs.pt.b64,
// base64 text of the same torch.save bytes, and check.json says
// "encoding": "base64": PyTorch's .pt2 loader (load_pt2, behind
// torch.export.load and torch._inductor.aoti_load_package) decodes every
// extra/ file as UTF-8, so a binary one would make the package unloadable.
// check.json (canonical JSON, sorted keys):
//   {"_type": "https://tsarchive.dev/run-check/v1", "method": "forward",
//    "atol": 1e-05, "rtol": 0.001, "tolerances": {"out[1]": {"atol":..,"rtol":..}},
//    "device": "cpu", "libtorch": "1.13.0", "producer": "tsarchive 0.1.0",
//    "createdAt": "2026-11-21T10:00:00Z", "inputs": ["x: Tensor float32 [2, 8]"],
//    "outputs": ["out: Tensor float32 [2, 3]"]}
// with "encoding" only when it is not the raw torch.save bytes (so a
// TorchScript archive's check reads in any tsarchive that reads checks).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/run.h"
#include "core/edit/extra.h"
#include "format/archive.h"

namespace tsarchive {

class InputBudget;  // core/inputs/input_values.h

inline constexpr const char* kRunCheckName = "tsarchive/check.json";
inline constexpr const char* kRunCheckInputsName = "tsarchive/check_inputs.pt";
inline constexpr const char* kRunCheckOutputsName = "tsarchive/check_outputs.pt";
inline constexpr const char* kRunCheckType = "https://tsarchive.dev/run-check/v1";

// How the recorded inputs and outputs are stored: their torch.save bytes as
// they are (TorchScript archives), or base64 text of them (.pt2).
enum class RunCheckEncoding { TorchSave, Base64 };

// The encoding an archive of this kind records with.
RunCheckEncoding run_check_encoding_for(FileKind kind);

// The extra names (without "extra/") of the recorded inputs and outputs.
struct RunCheckFiles {
  std::string inputs, outputs;
};
RunCheckFiles run_check_files(RunCheckEncoding encoding);

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
  RunCheckEncoding encoding = RunCheckEncoding::TorchSave;
};

std::string render_run_check(const RunCheck& check);
// Error(BadInput) naming `file` when the JSON is not a run check this tool reads.
RunCheck parse_run_check(const std::string& json, const std::string& file);

// The extra edits that store `check` with a run's inputs and outputs
// (torch.save bytes), encoded as check.encoding says.
std::vector<ExtraEdit> run_check_edits(const RunCheck& check, const std::string& inputs_pt,
                                       const std::string& outputs_pt);

// True when the archive holds extra/tsarchive/check.json.
bool has_run_check(const TorchArchive& archive);

struct RecordedCheck {
  RunCheck check;
  RunCheckFiles files;     // where the inputs and outputs were read from
  std::string inputs_pt;   // torch.save bytes, decoded
  std::string outputs_pt;
};

// The archive's recorded check, its inputs and outputs decoded to torch.save
// bytes (each at most `max_size`). Error(BadInput) naming `file` when it has
// none, a file is missing, check.json does not read or base64 does not decode.
RecordedCheck read_recorded_check(const TorchArchive& archive, const std::string& file, uint64_t max_size);

// "x: Tensor float32 [2, 8]", "scale: float 2.5".
std::string value_line(const ValueSummary& value);

// One output's check in a sentence: "3 of 20 values outside tolerance; max
// abs error ...", or what made it fail (a shape, type or missing value).
std::string check_text(const OutputCheck& c);
// What to do about a failed check: raise the tolerances only where values
// differ; a shape, type or missing value is no matter of tolerance.
std::string failed_check_hint(const OutputCheck& c);

// run --check and serve --ready-check: the archive's recorded check (run
// --record) as the request's inputs, expected outputs and method, their
// storages within `budget` (what the archive's author put there is held to
// the user's memory limit, as --input is). Error(BadInput) naming `file` when
// it has none, it does not read or it passes the budget.
RunCheck load_recorded_check(const TorchArchive& archive, RunRequest& request, const std::string& file,
                             InputBudget& budget);

}  // namespace tsarchive
