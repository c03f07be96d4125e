// inspect --json is streamed (JsonWriter) without building the document; the
// same description also builds the nlohmann document (JsonBuilder). The text
// must be json_text() of that document byte for byte: nlohmann's layout and
// escapes, and \udcXX for each byte that is not UTF-8.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/json_writer.h"
#include "cli/output.h"
#include "cli/report_inspect.h"
#include "core/inspect/inspect.h"
#include "helpers.h"

using namespace tsarchive;
using tsarchive::cli::inspect_json_text;
using tsarchive::cli::inspect_to_json;
using tsarchive::cli::json_text;
using tsarchive::cli::write_inspect_json;

namespace {

std::string written(const InspectReport& r, int indent) {
  std::ostringstream out;
  write_inspect_json(r, indent, out);
  return out.str();
}

// Whether the streamed text (whole, and written to a stream in chunks) equals
// the built document's, in both layouts inspect writes (indent 2; -1 for JSON Lines).
void check_same(const InspectReport& r) {
  const nlohmann::ordered_json doc = inspect_to_json(r);
  for (const int indent : {2, -1}) {
    INFO(r.path << ", indent " << indent);
    const std::string expected = json_text(doc, indent);
    CHECK(inspect_json_text(r, indent) == expected);
    CHECK(written(r, indent) == expected);
  }
}

InspectReport hostile_report() {
  InspectReport r;
  r.path = "dir/\"quoted\"\\back\tslash\x01\x1f\x7f.pt";
  r.file_size = 18446744073709551615ull;
  r.kind = FileKind::TorchScript;
  r.is_zip = true;
  for (int b = 0; b < 256; ++b) r.notes.push_back(std::string("byte ") + static_cast<char>(b) + " end");
  r.notes.push_back("\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x80\xae bidi \xee\x80\x80 private use");          // valid
  r.notes.push_back("\xc0\xaf overlong \xed\xa0\x80 surrogate \xf4\x90\x80\x80 above \xe2\x82 cut");  // not
  r.notes.push_back("");
  r.top_folder = "top\xff";
  r.format_version = 3;
  r.byteorder = "little";
  RecordInfo rec;
  rec.name = "top\xff/data/0";
  rec.kind = RecordKind::TensorData;
  rec.crc32 = 0xffffffffu;
  rec.size = 1ull << 40;
  r.records = {rec, rec};
  TensorInfo t;
  t.path = "layer.\xe2\x80\xae weight";
  t.shape = {2, 0, 3};
  t.stride = {-1, 9223372036854775807ll, (-9223372036854775807ll - 1)};
  t.storage_offset = -5;
  t.quantization = "per_tensor_affine";
  r.tensors = {t, TensorInfo{}};
  r.storages = {StorageInfo{}};
  RunCheck check;
  check.tolerance.atol = 1e-5;
  check.tolerance.rtol = 0.25;
  check.inputs = {"x: float32 [1, 3]"};
  r.run_check = check;
  OnnxInfo onnx;
  onnx.ir_version = -1;
  onnx.opsets = {{"", 17}, {"com.microsoft\x80", 1}};
  r.onnx = onnx;
  CodeClass c;
  c.qualified_name = "__torch__.M";
  c.parameters = {"w"};
  CodeMethod m;
  m.name = "forward";
  m.parameters = {CodeParameter{"self", "__torch__.M", ""}, CodeParameter{"x", "Tensor", "None"}};
  m.return_type = "Tensor";
  c.methods = {m, CodeMethod{}};
  r.classes = {c, CodeClass{}};
  r.modules = {ModuleInfo{"", "__torch__.M"}};
  return r;
}

}  // namespace

TEST_CASE("inspect --json: the streamed text is the document's json_text, hostile strings included") {
  const InspectReport r = hostile_report();
  check_same(r);
  const std::string text = inspect_json_text(r, 2);
  CHECK(text.find("\"top\\udcff\"") != std::string::npos);                  // not UTF-8: surrogateescape
  CHECK(text.find("\"byte \\u0001 end\"") != std::string::npos);             // control: \u00XX, lowercase
  CHECK(text.find("\"byte \x7f end\"") != std::string::npos);                // DEL as it is, as nlohmann
  // Bidi and C1 controls and what draws nothing as \u escapes, in both writers (review 56a, F6).
  CHECK(text.find("layer.\\u202e weight") != std::string::npos);
  CHECK(text.find("\xe2\x80\xae") == std::string::npos);
  const nlohmann::ordered_json hidden = {{"n", "a\xc2\x9b" "b\xf3\xa0\x81\x81" "c\xe2\x80\xa8" "d caf\xc3\xa9"}};
  CHECK(json_text(hidden, -1) == "{\"n\":\"a\\u009bb\\udb40\\udc41c\\u2028d caf\xc3\xa9\"}");
  CHECK(nlohmann::ordered_json::parse(json_text(hidden, -1)) == hidden);
  CHECK(text.find("\"atol\": 1e-05") != std::string::npos);                  // nlohmann's number form
  CHECK(text.find("\"storage_offset\": -5") != std::string::npos);
  CHECK(text.find("\"tensors\": [],\n") == std::string::npos);               // tensors there: not empty
  CHECK(inspect_json_text(InspectReport{}, 2) == json_text(inspect_to_json(InspectReport{}), 2));
}

TEST_CASE("inspect --json: a report of several chunks is written whole, in order") {
  InspectReport r = hostile_report();
  const TensorInfo t = r.tensors.front();
  r.tensors.clear();
  for (int i = 0; i < 3000; ++i) {
    r.tensors.push_back(t);
    r.tensors.back().path = "layer" + std::to_string(i) + ".weight";
  }
  const std::string text = written(r, 2);
  CHECK(text.size() > 4 * cli::JsonWriter::kChunk);
  CHECK(text.find("\"layer2999.weight\"") != std::string::npos);
  check_same(r);
}

TEST_CASE("inspect --json: streamed and built agree on every archive of testdata") {
  namespace fs = std::filesystem;
  size_t compared = 0, escaped = 0;
  for (const char* folder : {"", "hostile", "pt2", "torch2", "versions", "jit", "pickle_shapes", "loadsafety/benign",
                             "loadsafety/evil", "loadsafety/crafted"}) {
    const fs::path dir = fs::path(testdata(folder));
    if (!fs::is_directory(dir)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      InspectReport r;
      try {
        r = inspect_file(e.path().string());
      } catch (const Error&) {
        continue;  // a file inspect refuses has no report to render
      }
      check_same(r);
      ++compared;
      if (inspect_json_text(r, -1).find("\\u00") != std::string::npos) ++escaped;
    }
  }
  CHECK(compared >= 90);
  // Control characters in names (hostile/name_control_chars.pt); bytes that
  // are not UTF-8 are refused in names, and come from the report above.
  CHECK(escaped >= 1);
}

TEST_CASE("inspect: a legacy tar file lists its members as tarfile does, links with their targets") {
  const InspectReport r = inspect_file(testdata("loadsafety/crafted/tar_hardlink_pickle.pt"));
  CHECK(r.kind == FileKind::LegacyTar);
  REQUIRE(r.tar);
  std::vector<std::string> names;
  for (const TarMember& m : r.tar->members) names.push_back(m.name);
  CHECK(names == std::vector<std::string>{"sys_info", "pickle", "tensors", "storages", "notes.txt", "pickle"});
  CHECK(tar_type_name(r.tar->members.back().type) == "hard link");
  CHECK(r.tar->members.back().linkname == "notes.txt");
  std::ostringstream text;
  cli::render_inspect_text(r, cli::InspectView{}, text);
  CHECK(text.str().find("Members (6)") != std::string::npos);
  CHECK(text.str().find("hard link to notes.txt") != std::string::npos);
  const nlohmann::ordered_json doc = inspect_to_json(r);
  CHECK(doc["tar"]["members"][5]["type"] == "hard link");
  CHECK(doc["tar"]["members"][5]["header_offset"] == 5120);
  check_same(r);
  // The verdict's first finding is the link torch.load follows, not the extra member beside it.
  REQUIRE(r.load_safety);
  REQUIRE_FALSE(r.load_safety->findings.empty());
  CHECK(r.load_safety->findings.front().what.find("hard link to 'notes.txt'") != std::string::npos);
}
