// What loading a file would execute: a verdict per loader, from the pickles
// (and TorchScript code) alone, never by loading anything.
//
// Every global a pickle imports and every callable it invokes (pickle_scan.h)
// is checked against an allowlist of known-benign globals: tensor and storage
// rebuilding, dtypes, containers, numpy scalars and arrays. Anything else is a
// finding; a small table of known-dangerous modules and names only *names* the
// danger (process execution, code evaluation, import machinery, file and
// network I/O), it never decides. Crafted files (shapes no writer makes and
// that attack a loader) are findings too, with the PyTorch versions they
// attack.
//
// Loaders judged:
//   torch.load(weights_only=True)   PyTorch's own allowlist and opcode set for
//                                   the version asked (--torch-version)
//   torch.load(weights_only=False), pickle.load   every call, as listed
//   torch.jit.load                  TorchScript classes, torch.classes custom
//                                   classes, operators in code/ that touch files
//   torch.export.load               .pt2 payloads stored as pickles
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/archive.h"
#include "format/byte_source.h"
#include "format/pickle_scan.h"
#include "format/tar.h"

namespace tsarchive {

struct LoadSafetyOptions {
  std::string torch_version;                 // "2.13" when empty (the newest known)
  std::vector<std::string> allowed_globals;  // "module.name", or "module.*", a team's own classes
  // Libraries of custom operators and classes are given (--load-library): the
  // namespaces code calls outside libtorch are taken to be theirs, as
  // torch.ops.load_library before torch.jit.load makes them.
  bool operator_libraries = false;
};

// Ordered by severity.
enum class LoadRisk { None = 0, Unlisted = 1, Dangerous = 2, Crafted = 3 };
std::string_view load_risk_id(LoadRisk risk);  // "none", "unlisted", "dangerous", "crafted"

struct LoadFinding {
  LoadRisk risk = LoadRisk::Unlisted;
  std::string where;     // "data.pkl", "the pickle", "code/__torch__/m.py"
  std::string what;      // "calls posix.system (REDUCE at offset 12)"
  std::string global;    // the global concerned, if any
  std::string category;  // "process execution", ... ; "" when unknown
  std::string attacks;   // the loaders and versions a crafted file attacks
};

struct LoaderVerdict {
  std::string loader;   // "torch.load(weights_only=True)"
  std::string outcome;  // "accepts", "refuses", "runs code", "not applicable"
  std::string why;
};

struct LoadSafety {
  std::string torch_version;
  std::vector<std::string> pickles;    // what was read ("data.pkl", "constants.pkl", "the pickle")
  std::vector<std::string> globals;    // distinct globals imported, first seen first
  std::vector<std::string> callables;  // distinct callables invoked
  std::vector<LoaderVerdict> loaders;
  std::vector<LoadFinding> findings;
  // Damage, not a risk: a pickle that the end of the file cuts short (no
  // STOP, an operand past the end). Loaders fail there, after running what
  // came before, which the findings judge.
  std::vector<std::string> damage;
  // Every import is a tensor/storage rebuild, a dtype or a plain container: what
  // run's inputs may hold.
  bool tensor_rebuilding_only = true;

  LoadRisk worst() const;
  bool unsafe() const { return worst() != LoadRisk::None; }
  // The worst finding (the first of that risk) as one line, "crafted: WHERE
  // WHAT", cut at 400 bytes on a UTF-8 boundary; empty when there is none.
  std::string worst_line() const;
  // What would make the verdict safe, when only names the allowlist does not
  // know stand in the way (never for what is dangerous or crafted).
  struct Acceptance {
    std::vector<std::string> allow_globals;  // each for --allow-global, in finding order
    bool load_library = false;               // a custom operator or class: its library vouches too
  };
  std::optional<Acceptance> acceptance() const;
};

// The verdict for any file tsarchive reads: a TorchScript, torch.save (ZIP or
// legacy), .pt2 or plain pickle file. `name` (the path) gives the extension.
// Throws Error(BadInput) for what the ZIP checks refuse, as inspect does,
// unless names a loader still reads make it crafted (assess_refused_zip_names).
LoadSafety assess_load_safety(const ByteSource& source, const LoadSafetyOptions& options = {});
// The same for an archive already open.
LoadSafety assess_archive_load_safety(const TorchArchive& archive, const LoadSafetyOptions& options = {});
// The same for a ZIP in torch.export's layout before PyTorch 2.6 (its records
// at the root, a "version" among them), which torch.export.load (2.13) still
// reads through Python's zipfile; nothing for any other file.
std::optional<LoadSafety> assess_legacy_export_load_safety(const ByteSource& source,
                                                           const LoadSafetyOptions& options = {});
// A ZIP that tsarchive's ZIP checks refuse (read_zip_layout throws), judged by
// its names as the loaders would read them: a name that makes a loader write
// outside its folder (a '..' part under data/aotinductor/, which
// AOTIModelPackageLoader extracts as it is), a NUL byte (Python's zipfile cuts
// the name there) or a name twice (zipfile reads the last, miniz either) is
// crafted, not damage. Nothing when no name is such; `kind` is what the names
// make the file.
struct RefusedZipVerdict {
  FileKind kind = FileKind::OtherZip;
  LoadSafety safety;
};
std::optional<RefusedZipVerdict> assess_refused_zip_names(const ByteSource& source,
                                                          const LoadSafetyOptions& options = {});
// The same for a legacy tar file whose members the caller listed (list_tar).
LoadSafety assess_tar_load_safety(const ByteSource& source, const TarListing& tar, const LoadSafetyOptions& options = {});

// Whether a file starts like a pickle (PROTO 2-5, or a protocol 0/1 opcode
// that can begin one) and is not a legacy torch.save file.
bool looks_like_pickle(const ByteSource& source);

// The allowlist: whether `global` ("module.name") is known to be benign.
bool is_benign_global(std::string_view global);
// PyTorch's own weights_only allowlist for `torch_version` ("1.13", "2.6", ...).
bool torch_weights_only_allows(std::string_view global, std::string_view torch_version);
// What a known-dangerous global does ("process execution"), or "".
std::string dangerous_category(std::string_view global);

// The newest PyTorch whose allowlist is known.
inline constexpr const char* kNewestTorchVersion = "2.13";

}  // namespace tsarchive
