#include "fuzz_entry.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "format/archive.h"
#include "base/bounded_json.h"
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>
#include "base/error.h"
#include "core/edit/extra.h"
#include "core/inputs/image.h"
#include "core/inputs/input_values.h"
#include "core/inspect/inspect.h"
#include "core/inspect/load_safety.h"
#include "core/provenance/model_signature.h"
#include "core/provenance/sigstore_trust_root.h"
#include "core/provenance/transparency_log.h"
#include "format/pickle_scan.h"
#include "format/tar.h"
#include "format/torchscript_code.h"
#include "core/inspect/pt2_graph.h"
#include "format/pt2.h"
#include "format/model.h"
#include "format/pickle.h"
#include "core/provenance/producer_info.h"
#include "core/inputs/run_check.h"
#include "base/terminal_text.h"
#include "core/provenance/verify.h"
#include "format/zip.h"

namespace tsarchive::fuzz {
namespace {

std::string bytes_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Small caps keep each input fast; the real limits are tested elsewhere.
constexpr uint64_t kEntryCap = 4ull << 20;

}  // namespace

void zip_layer(const uint8_t* data, size_t size) {
  try {
    ZipArchive zip(make_memory_source(bytes_of(data, size)));
    for (const ZipEntry& e : zip.entries()) {
      try {
        zip.read(e, kEntryCap);
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
}

void pickle_reader(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  PickleGraph graph;
  try {
    graph = parse_pickle(bytes, "fuzz.pkl", 0, nullptr, PickleLimits{1u << 20});
  } catch (const Error&) {
    return;
  }
  // The walkers see the graph as data.pkl, constants.pkl and a torch.save
  // object in turn; they report problems, never throw for content.
  try {
    ModelContents module;
    collect_module(graph, ClassIndex{}, module);
  } catch (const Error&) {
  }
  try {
    ModelContents constants;
    collect_constants(graph, constants);
  } catch (const Error&) {
  }
  try {
    ModelContents saved;
    collect_saved_object(graph, "data", saved);
  } catch (const Error&) {
  }
}

namespace {

// The same bytes as run's --input @FILE.pt (memo budget, byte order), when
// what they inflate to stays small: the value reader's storage limit is GiBs.
void torch_save_value(const uint8_t* data, size_t size) {
  try {
    const ZipArchive zip(make_memory_source(bytes_of(data, size)));
    uint64_t inflated = 0;
    for (const ZipEntry& e : zip.entries()) {
      if (e.uncompressed_size > kEntryCap - inflated) return;
      inflated += e.uncompressed_size;
    }
    (void)read_torch_save_value(*make_memory_source(bytes_of(data, size), "fuzz.pt"));
  } catch (const Error&) {
  }
}

}  // namespace

void inspect_path(const uint8_t* data, size_t size) {
  try {
    inspect_source(make_memory_source(bytes_of(data, size)));
  } catch (const Error&) {
  }
  try {
    auto archive = open_torchscript_archive(make_memory_source(bytes_of(data, size)), "fuzz", true);
    verify_archive(*archive, VerifyOptions{1, std::nullopt});
    if (archive->kind() == FileKind::ExportedProgram) {
      // What diff and inspect --graph read of a .pt2 besides inspect's report.
      try {
        (void)pt2_tensors(read_pt2(*archive));
      } catch (const Error&) {
      }
      (void)pt2_method_graph(*archive, "");
    }
  } catch (const Error&) {
  }
  torch_save_value(data, size);
}

void signature_bundle(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  try {
    const ModelBundle bundle = parse_bundle(bytes);
    (void)dsse_pae(bundle.payload);
    (void)dsse_pae_v02(bundle.payload);
    const ModelStatement statement = parse_statement(bundle.payload);
    (void)statement_json(statement);
  } catch (const Error&) {
  }
  try {
    (void)parse_statement(bytes);
  } catch (const Error&) {
  }
}

void sigstore_trust_root(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  try {
    (void)parse_trust_root(bytes);
  } catch (const Error&) {
  }
  try {
    const ModelBundle bundle = parse_bundle(bytes, true);
    if (bundle.keyless()) {
      for (const TlogEntry& entry : parse_tlog_entries(bundle.tlog_entries_json)) {
        (void)signed_entry_timestamp_payload(entry);
        if (entry.inclusion_proof) {
          (void)merkle_root_from_proof(merkle_leaf_hash(entry.body), entry.inclusion_proof->log_index,
                                       entry.inclusion_proof->tree_size, entry.inclusion_proof->hashes);
        }
      }
    }
  } catch (const Error&) {
  }
}

void json_text(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  if (const auto doc = parse_bounded_json(bytes)) {
    (void)doc->dump();
  }
  (void)pretty_json(bytes);
  ExtraFileInfo info;
  describe_extra_content(bytes, info);
  try {
    parse_stamp(bytes, "fuzz.pt");
  } catch (const Error&) {
  }
  try {
    parse_run_check(bytes, "fuzz.pt");
  } catch (const Error&) {
  }
  for (const TextEscape mode : {TextEscape::Line, TextEscape::Block}) {
    const std::string shown = escape_text(bytes, mode);
    // What is shown has nothing left to escape, so escaping is idempotent.
    if (needs_escape(shown, mode) || escape_text(shown, mode) != shown) std::abort();
    if (mode == TextEscape::Line && shown.find_first_of("\r\n") != std::string::npos) std::abort();
    if (needs_escape(bytes, mode) == (shown == bytes)) std::abort();
  }
  const std::string preview = escape_text(info.preview);
  if (needs_escape(preview)) std::abort();
}

void worker_reply(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  constexpr size_t kDepth = 64;
  constexpr uint64_t kDecoded = uint64_t{1} << 24;
  const CborShape shape = measure_cbor(bytes, kDepth, kDecoded);
  if (!shape.well_formed) return;
  if (shape.depth > kDepth || shape.decoded_bytes > kDecoded) std::abort();
  nlohmann::json decoded;
  try {
    decoded = nlohmann::json::from_cbor(bytes);
  } catch (const nlohmann::json::exception&) {
    return;  // decode_result says "does not decode"
  }
  const std::vector<uint8_t> again = nlohmann::json::to_cbor(decoded);
  const CborShape written =
      measure_cbor(std::string_view(reinterpret_cast<const char*>(again.data()), again.size()), kDepth, kDecoded);
  // Duplicate map keys collapse when decoded: never more, possibly less.
  if (!written.well_formed || written.depth > shape.depth || written.values > shape.values ||
      written.decoded_bytes > shape.decoded_bytes)
    std::abort();
}

void image(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  ImageLimits limits;
  limits.max_pixels = int64_t{4} << 20;
  limits.max_side = 4096;
  try {
    const Image decoded = decode_image(bytes, "fuzz.png", limits);
    // What a batch is budgeted by is the size decoding gives.
    const ImageSize header = read_image_size(bytes, "fuzz.png", limits);
    if (header.width != decoded.width || header.height != decoded.height) std::abort();
    const std::string png = encode_png(decoded.rgb, decoded.width, decoded.height, 3);
    const Image again = decode_image(png, "fuzz-again.png", limits);
    if (again.width != decoded.width || again.height != decoded.height || again.rgb != decoded.rgb) std::abort();
  } catch (const Error&) {
  }
  try {
    (void)parse_labels(bytes, "fuzz.json");
  } catch (const Error&) {
  }
}

void load_safety(const uint8_t* data, size_t size) {
  const std::string bytes = bytes_of(data, size);
  const PickleScan scan = scan_pickle(bytes, 0, 1000);
  if (!scan.complete && scan.error.empty()) std::abort();  // an incomplete scan says why
  // The same bytes as a code/ record: names are whole words joined by dots.
  for (const std::string& name : code_dotted_names(bytes)) {
    if (name.empty() || name.front() == '.' || name.back() == '.' ||
        name.find_first_of(" \t\r\n#'\"") != std::string::npos) {
      std::abort();
    }
  }
  try {
    const auto source = make_memory_source(bytes, "fuzz.pkl");
    const LoadSafety verdict = assess_load_safety(*source);
    if (looks_like_pickle(*source) && detect_file_kind(*source) == FileKind::NotAModel && verdict.loaders.empty()) {
      std::abort();
    }
  } catch (const Error&) {
  }
  // The same bytes as a tar: the first header's checksum made right, so that
  // every input reaches the member walk of the legacy tar format.
  if (size < 512) return;
  std::string tar = bytes;
  tar.replace(148, 8, 8, ' ');
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += static_cast<unsigned char>(tar[i]);
  char field[8];
  std::snprintf(field, sizeof field, "%06o", sum);
  tar.replace(148, 7, field, 7);  // six digits and their NUL, then the space
  try {
    const auto source = make_memory_source(tar, "fuzz.pt");
    const std::optional<TarListing> listing = list_tar(*source, 1000);
    if (listing && listing->members.size() > 1000) std::abort();
    assess_load_safety(*source);
  } catch (const Error&) {
  }
}

}  // namespace tsarchive::fuzz
