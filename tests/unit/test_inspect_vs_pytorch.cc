// Every claim inspect makes about a testdata archive, checked against what
// PyTorch itself reported for it when scripts/make_testdata.py wrote it
// (testdata/expected/<file>.json).
#include <catch2/catch.hpp>

#include <dirent.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "helpers.h"
#include "core/inspect/inspect.h"

using namespace tsarchive;
using nlohmann::json;

namespace {

std::vector<std::string> expected_files() {
  std::vector<std::string> files;
  DIR* dir = opendir(testdata("expected").c_str());
  REQUIRE(dir != nullptr);
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) files.push_back(name.substr(0, name.size() - 5));
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  return files;
}

// "forward(__torch__.M self, Tensor x, float scale=2.) -> Tensor" -> {"x", "scale"}
std::vector<std::string> schema_argument_names(const std::string& schema) {
  const size_t open = schema.find('('), close = schema.rfind(") ->");
  std::vector<std::string> names;
  int depth = 0;
  std::string current;
  auto flush = [&] {
    std::string decl = current.substr(0, current.find('='));
    while (!decl.empty() && decl.back() == ' ') decl.pop_back();
    const size_t space = decl.rfind(' ');
    if (!decl.empty()) names.push_back(decl.substr(space + 1));
    current.clear();
  };
  for (size_t i = open + 1; i < close; ++i) {
    const char c = schema[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) flush();
    else current += c;
  }
  flush();
  if (!names.empty() && names.front() == "self") names.erase(names.begin());
  return names;
}

void check_zip(const InspectReport& r, const json& zip) {
  CHECK(r.top_folder == zip["top_folder"].get<std::string>());
  if (zip["version"].is_null()) CHECK_FALSE(r.format_version);
  else CHECK(r.format_version == zip["version"].get<int64_t>());
  const json& records = zip["records"];
  REQUIRE(r.records.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const json& want = records[i];
    const RecordInfo& got = r.records[i];
    INFO("record " << want["name"]);
    CHECK(got.name == want["name"].get<std::string>());
    CHECK(got.size == want["size"].get<uint64_t>());
    CHECK(got.compressed_size == want["compressed_size"].get<uint64_t>());
    CHECK(zip_method_name(got.method) == want["method"].get<std::string>());
    CHECK(got.crc32 == want["crc32"].get<uint32_t>());
    CHECK(got.data_offset == want["data_offset"].get<uint64_t>());
  }
}

void check_tensors(const InspectReport& r, const json& expected) {
  std::map<std::string, const TensorInfo*> by_path;
  for (const TensorInfo& t : r.tensors) by_path[t.path] = &t;
  uint64_t elements = 0;
  for (const TensorInfo& t : r.tensors) elements += t.numel;
  for (const json& want : expected["tensors"]) {
    const std::string path = want["path"];
    INFO("tensor '" << path << "'");
    REQUIRE(by_path.count(path) == 1);
    const TensorInfo& got = *by_path[path];
    CHECK(got.shape == want["shape"].get<std::vector<int64_t>>());
    CHECK(got.dtype == want["dtype"].get<std::string>());
    if (want.contains("stride")) CHECK(got.stride == want["stride"].get<std::vector<int64_t>>());
    if (want.contains("storage_offset")) CHECK(got.storage_offset == want["storage_offset"].get<int64_t>());
    if (want.contains("qscheme")) CHECK(got.quantization == want["qscheme"].get<std::string>());
    const std::string role = want["role"];
    if (role == "parameter" || role == "buffer" || role == "constant") CHECK(tensor_role_id(got.role) == role);
  }
  const std::string kind = expected["kind"];
  if (kind == "torch_save" || kind == "legacy_torch_save") {
    CHECK(r.tensors.size() == expected["tensors"].size());
    CHECK(elements == expected["parameter_count"].get<uint64_t>());  // all state-dict entries
  } else {
    CHECK(r.parameter_count == expected["parameter_count"].get<uint64_t>());
  }
  if (expected.contains("storages")) CHECK(r.storages.size() == expected["storages"].get<size_t>());
}

void check_code(const InspectReport& r, const json& expected) {
  std::set<std::pair<std::string, std::string>> want_modules, got_modules;
  for (const json& m : expected["modules"]) want_modules.emplace(m["path"], m["type"]);
  for (const ModuleInfo& m : r.modules) got_modules.emplace(m.path, m.type);
  CHECK(got_modules == want_modules);

  const CodeClass* root = nullptr;
  for (const CodeClass& c : r.classes) root = c.qualified_name == r.root_type ? &c : root;
  REQUIRE(root != nullptr);
  std::map<std::string, const CodeMethod*> methods;
  for (const CodeMethod& m : root->methods) methods[m.name] = &m;
  for (const auto& [name, schema] : expected["methods"].items()) {
    INFO("method " << name << ": " << schema);
    REQUIRE(methods.count(name) == 1);
    std::vector<std::string> got_args;
    for (const CodeParameter& p : methods[name]->parameters) got_args.push_back(p.name);
    CHECK(got_args == schema_argument_names(schema.get<std::string>()));
  }
}

}  // namespace

TEST_CASE("inspect agrees with PyTorch on every testdata archive") {
  const std::vector<std::string> files = expected_files();
  REQUIRE(files.size() >= 10);
  for (const std::string& file : files) {
    DYNAMIC_SECTION(file) {
      const json expected = json::parse(slurp(testdata("expected/" + file + ".json")));
      const InspectReport r = inspect_file(testdata(file));
      CHECK(file_kind_id(r.kind) == expected["kind"].get<std::string>());
      CHECK(r.problems.empty());
      if (expected.contains("zip")) check_zip(r, expected["zip"]);
      if (expected.contains("extra_files")) {
        std::map<std::string, std::string> got;
        for (const ExtraFileInfo& e : r.extra_files) got[e.name] = read_extra_file(testdata(file), e.name);
        CHECK(got == expected["extra_files"].get<std::map<std::string, std::string>>());
      }
      if (expected["kind"] == "onnx") {
        REQUIRE(r.onnx);
        CHECK(r.onnx->producer_name == "pytorch");
        continue;
      }
      check_tensors(r, expected);
      if (expected.contains("modules")) check_code(r, expected);
      if (expected.contains("bytecode_version")) CHECK(r.bytecode_version == expected["bytecode_version"].get<int64_t>());
    }
  }
}

TEST_CASE("inspect: per-channel quantized weights account for every storage record") {
  // testdata/quant_per_channel.pt (scripts/make_testdata.py): each weight's
  // _rebuild_qtensor carries (per_channel_affine, scales, zero_points, axis);
  // the scales and zero points have storages of their own.
  const InspectReport r = inspect_file(testdata("quant_per_channel.pt"));
  CHECK(r.problems.empty());
  size_t records = 0;
  for (const RecordInfo& rec : r.records) records += rec.kind == RecordKind::TensorData ? 1 : 0;
  CHECK(records == 10);
  CHECK(r.storages.size() == records);
  CHECK(r.tensors.size() == 10);
  std::map<std::string, const TensorInfo*> by_path;
  for (const TensorInfo& t : r.tensors) by_path[t.path] = &t;
  for (const char* weight : {"conv.10", "fc._packed_params._packed_params.0"}) {
    REQUIRE(by_path.count(weight) == 1);
    CHECK(by_path[weight]->quantization == "per_channel_affine");
    const auto scales = by_path.find(std::string(weight) + ".q_per_channel_scales");
    const auto zero_points = by_path.find(std::string(weight) + ".q_per_channel_zero_points");
    REQUIRE(scales != by_path.end());
    REQUIRE(zero_points != by_path.end());
    CHECK(scales->second->dtype == "float64");
    CHECK(zero_points->second->dtype == "int64");
    CHECK(scales->second->shape == std::vector<int64_t>{by_path[weight]->shape[0]});
  }
  for (const std::string& note : r.notes) CHECK(note.find("no tensor of the pickles reaches") == std::string::npos);
}
