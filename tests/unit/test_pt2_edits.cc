// The archive verbs on .pt2 archives written by PyTorch 2.13 (testdata/pt2/):
// extra list/get/set/rm/export/import, verify, diff, stamp, and inspect --graph,
// with the same invariants as for TorchScript. tests/pytorch/check_pt2_edits.py
// proves that PyTorch still loads what they write.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/compare/diff.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/inspect/inspect.h"
#include "core/inspect/pt2_graph.h"
#include "core/inputs/run_check.h"
#include "format/byte_source.h"
#include "format/pt2.h"
#include "format/zip_writer.h"
#include "helpers.h"

using namespace tsarchive;
using nlohmann::json;

namespace {

const char* const kArchives[] = {"with_extra.pt2", "mlp_dynamic.pt2", "buffers_consts.pt2", "mlp_dynamic_aoti.pt2",
                                 "buffers_consts_aoti.pt2"};

// The top folder PyTorch 2.13 gives a .pt2: the file's stem ("with_extra").
std::string top_of(const std::string& name) { return name.substr(0, name.size() - 4); }

std::string copy_pt2(const TempDir& dir, const std::string& name) {
  const std::string to = dir.file(name);
  std::filesystem::copy_file(testdata("pt2/" + name), to, std::filesystem::copy_options::overwrite_existing);
  return to;
}

// Every record but extra/ ones, with its bytes as stored and whether its data is 64-byte aligned.
std::map<std::string, std::pair<std::string, bool>> kept_records(const std::string& path) {
  const TorchArchive archive(open_file_source(path));
  std::map<std::string, std::pair<std::string, bool>> out;
  for (const Record& r : archive.records()) {
    if (r.kind == RecordKind::Extra) continue;
    const ZipEntry& e = *r.entry;
    out[r.name] = {archive.zip().source().read_string(e.data_offset, e.compressed_size), e.data_offset % 64 == 0};
  }
  return out;
}

// `path` with record `name` holding `bytes` instead (a model retrained, or damage).
void replace_record(const std::string& path, const std::string& name, const std::string& bytes) {
  const std::string out = archive_with_record(path, name, bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
}

}  // namespace

TEST_CASE("pt2 extra: list and get read what torch.export.save wrote", "[pt2][extra]") {
  const CliResult list = run_cli({"extra", "list", "--json", testdata("pt2/with_extra.pt2")});
  REQUIRE(list.code == 0);
  std::vector<std::string> names;
  const json doc = json::parse(list.out);
  for (const json& e : doc["extra_files"]) names.push_back(e["name"]);
  CHECK(names == std::vector<std::string>{"labels.json", "notes/card.md"});
  const TorchArchive archive(open_file_source(testdata("pt2/with_extra.pt2")));
  const CliResult get = run_cli({"extra", "get", testdata("pt2/with_extra.pt2"), "notes/card.md"});
  CHECK(get.code == 0);
  CHECK(get.out == archive.read(*archive.find("extra/notes/card.md"), 1 << 20));
  const CliResult none = run_cli({"extra", "list", testdata("pt2/mlp_dynamic_aoti.pt2")});
  CHECK(none.code == 0);
  CHECK(none.out.find("no extra files") != std::string::npos);
}

TEST_CASE("pt2 extra: edits keep every other record byte for byte and aligned", "[pt2][extra]") {
  TempDir dir;
  for (const char* name : kArchives) {
    INFO(name);
    const std::string path = copy_pt2(dir, name);
    const std::string original = slurp(path);
    const auto before = kept_records(path);

    // set then rm of a new name: the original bytes
    REQUIRE(run_cli({"extra", "set", path, "build.txt=42"}).code == 0);
    REQUIRE(run_cli({"extra", "rm", path, "build.txt"}).code == 0);
    CHECK(slurp(path) == original);

    REQUIRE(run_cli({"extra", "set", path, "labels.json={\"a\":1}", "notes/x.md=# x", "owner=me"}).code == 0);
    CHECK(kept_records(path) == before);
    const InspectReport r = inspect_file(path);
    CHECK(r.problems.empty());
    REQUIRE(r.pt2);
    for (const Pt2Program& p : r.pt2->programs) {
      for (const Pt2Payload& w : p.weights) CHECK((w.stored && w.aligned));
    }
    CHECK(run_cli({"extra", "get", path, "labels.json"}).out == "{\"a\":1}");
    // The records a .pt2 is made of stay first, the new extra files go after them.
    const TorchArchive archive(open_file_source(path));
    CHECK(archive.records().back().name == "extra/owner");
    CHECK(archive.top_folder() == top_of(name));

    REQUIRE(run_cli({"extra", "rm", path, "owner", "notes/x.md"}).code == 0);
    CHECK(kept_records(path) == before);
  }
}

TEST_CASE("pt2 extra: a value torch.export.load could not decode is refused, nothing written", "[pt2][extra]") {
  TempDir dir;
  const std::string path = copy_pt2(dir, "with_extra.pt2");
  const std::string original = slurp(path);
  std::ofstream(dir.file("blob.bin"), std::ios::binary) << std::string("\xff\xfe\x00\x01", 4);
  const CliResult r = run_cli({"extra", "set", path, "blob.bin=@" + dir.file("blob.bin")});
  CHECK(r.code == 2);
  CHECK(r.err.find("not UTF-8 text") != std::string::npos);
  CHECK(slurp(path) == original);
  // Text with control characters is still UTF-8: Python decodes it.
  CHECK(run_cli({"extra", "set", path, "tab.txt=a\tb"}).code == 0);
}

TEST_CASE("pt2 extra: export and import round-trip", "[pt2][extra]") {
  TempDir dir;
  const std::string path = copy_pt2(dir, "with_extra.pt2");
  const std::string original = slurp(path);
  REQUIRE(run_cli({"extra", "export", path, dir.file("meta")}).code == 0);
  CHECK(slurp(dir.file("meta/notes/card.md")) == run_cli({"extra", "get", path, "notes/card.md"}).out);
  REQUIRE(run_cli({"extra", "import", "--prune", path, dir.file("meta")}).code == 0);
  CHECK(slurp(path) == original);  // nothing changed: nothing written
  std::filesystem::remove(dir.file("meta/labels.json"));
  REQUIRE(run_cli({"extra", "import", "--prune", path, dir.file("meta")}).code == 0);
  CHECK(run_cli({"extra", "get", path, "labels.json"}).code == 3);
}

TEST_CASE("pt2 run --record's files are base64 text, every other record keeps its bytes", "[pt2][run]") {
  TempDir dir;
  std::filesystem::copy_file(testdata("pt2/run/affine_sample_aoti.pt2"), dir.file("p.pt2"));
  const std::string path = dir.file("p.pt2");
  const auto before = kept_records(path);
  std::string inputs, outputs;  // torch.save files PyTorch wrote: the package's sample inputs, and a program
  {
    const TorchArchive archive(open_file_source(path));
    inputs = archive.read(*archive.find("data/sample_inputs/model.pt"), 1 << 20);
    const TorchArchive other(open_file_source(testdata("pt2/mlp_dynamic.pt2")));
    outputs = other.read(*other.find("data/sample_inputs/model.pt"), 1 << 20);
  }
  RunCheck check;
  check.method = "model";
  check.encoding = run_check_encoding_for(FileKind::ExportedProgram);
  {
    ArchiveFile file(path, FileAccess::Edit, 1);
    const auto archive = open_torchscript_archive(file.source(), "no", /*accept_pt2=*/true);
    file.replace(plan_extra_edits(*archive, run_check_edits(check, inputs, outputs), false).zip);
  }
  CHECK(kept_records(path) == before);
  const TorchArchive archive(open_file_source(path));
  for (const ExtraFileInfo& f : list_extra_files(archive)) CHECK(f.text);  // what load_pt2 decodes as UTF-8
  const RecordedCheck back = read_recorded_check(archive, "p.pt2", 1 << 20);
  CHECK(back.check.encoding == RunCheckEncoding::Base64);
  CHECK(back.files.inputs == "tsarchive/check_inputs.pt.b64");
  CHECK(back.inputs_pt == inputs);
  CHECK(back.outputs_pt == outputs);
  CHECK(run_cli({"verify", "--allow-global", "aoti.model", path}).code == 0);  // its compiled model: trusted here
  const CliResult shown = run_cli({"inspect", path});
  CHECK(shown.out.find("self-check") != std::string::npos);
  // Above the size a check may hold: refused, named.
  error_of([&] { read_recorded_check(archive, "p.pt2", inputs.size() - 1); }, ErrorKind::BadInput,
           "extra/tsarchive/check_inputs.pt.b64");

  // Tampered: a byte that is not base64, or a file missing, is one error naming it.
  REQUIRE(run_cli({"extra", "set", path, "tsarchive/check_outputs.pt.b64=AAAA%AAA"}).code == 0);
  const Error e = error_of([&] { read_recorded_check(TorchArchive(open_file_source(path)), "p.pt2", 1 << 20); },
                           ErrorKind::BadInput, "extra/tsarchive/check_outputs.pt.b64 is not base64: byte 4 (0x25)");
  CHECK(e.file() == "p.pt2");
  REQUIRE(run_cli({"extra", "rm", path, "tsarchive/check_inputs.pt.b64"}).code == 0);
  error_of([&] { read_recorded_check(TorchArchive(open_file_source(path)), "p.pt2", 1 << 20); }, ErrorKind::BadInput,
           "no recorded check (extra/tsarchive/check_inputs.pt.b64 is missing)");
  CHECK(kept_records(path) == before);
}

TEST_CASE("pt2 verify: intact archives pass, damage and changes are found", "[pt2][verify]") {
  for (const char* name : kArchives) {
    INFO(name);
    // An AOTInductor package's shared library is native code: accepted by name.
    const CliResult r = run_cli({"verify", "--json", "--allow-global", "aoti.model", testdata(std::string("pt2/") + name)});
    CHECK(r.code == 0);
    const json doc = json::parse(r.out);
    CHECK(doc["problems"].empty());
  }
  TempDir dir;
  const std::string path = copy_pt2(dir, "mlp_dynamic.pt2");
  CHECK(run_cli({"verify", "--load", path}).code == 2);  // compiled code is loaded by run only
  // A weight record shorter than its tensor: damage (exit 3), named.
  replace_record(path, "data/weights/weight_1", "tiny");
  const CliResult damaged = run_cli({"verify", path});
  CHECK(damaged.code == 3);
  CHECK(damaged.err.find("data/weights/weight_1") != std::string::npos);
  // An archive_version torch.export.load of 2.13 does not read: unreadable, not damage.
  const std::string newer = copy_pt2(dir, "with_extra.pt2");
  replace_record(newer, "archive_version", "1");
  const CliResult unreadable = run_cli({"verify", "--json", newer});
  CHECK(unreadable.code == 3);
  CHECK(json::parse(unreadable.out)["problems"].empty());
  CHECK(unreadable.err.find("archive_version '1'") != std::string::npos);
}

TEST_CASE("pt2 stamp: written by the core, verified, chained", "[pt2][stamp]") {
  TempDir dir;
  for (const char* name : kArchives) {
    INFO(name);
    const std::string path = copy_pt2(dir, name);
    const auto before = kept_records(path);
    const CliResult s = run_cli({"stamp", "--no-git", "--no-host", "--json", path});
    REQUIRE(s.code == 0);
    const json doc = json::parse(s.out);
    CHECK(doc["method"] == "keep-bytes");
    CHECK(doc["stamp_record"] == "extra/producer_info.json");
    CHECK(doc["stamp"]["archive"]["name"] == top_of(name));
    CHECK(doc["stamp"]["entries"]["records"].contains("models/model.json") ==
          (std::string(name).find("aoti") == std::string::npos));
    CHECK(kept_records(path) == before);
    const CliResult v = run_cli({"verify", "--json", "--require-stamp", "--allow-global", "aoti.model", path});
    CHECK(v.code == 0);
    CHECK(json::parse(v.out)["stamp"]["matches"] == true);
    // Stamped again: the previous stamp is chained.
    REQUIRE(run_cli({"stamp", "--no-git", "--no-host", path}).code == 0);
    CHECK(json::parse(run_cli({"extra", "get", path, "producer_info.json"}).out).contains("previous"));
    // A changed extra file breaks the stamp: exit 1, named.
    REQUIRE(run_cli({"extra", "set", path, "owner=someone"}).code == 0);
    const CliResult changed = run_cli({"verify", "--json", "--allow-global", "aoti.model", path});
    CHECK(changed.code == 1);
    CHECK(json::parse(changed.out)["stamp"]["added"] == json::array({"extra/owner"}));
  }
}

TEST_CASE("pt2 verify names the tensor behind a changed weight record", "[pt2][verify]") {
  TempDir dir;
  const std::string path = copy_pt2(dir, "mlp_dynamic.pt2");
  REQUIRE(run_cli({"stamp", "--no-git", "--no-host", path}).code == 0);
  std::string weight;
  {
    const TorchArchive archive(open_file_source(path));
    weight = archive.zip().read(*archive.find("data/weights/weight_0")->entry, 1 << 20);
  }
  weight[0] = static_cast<char>(weight[0] ^ 1);
  const std::string changed = dir.file("changed.pt2");
  std::ofstream(changed, std::ios::binary) << archive_with_record(path, "data/weights/weight_0", weight);
  const CliResult v = run_cli({"verify", "--json", changed});
  CHECK(v.code == 1);
  CHECK(json::parse(v.out)["stamp"]["changed_tensors"]["data/weights/weight_0"] == json::array({"fc1.weight"}));
}

TEST_CASE("pt2 diff: records, extra files and weights by name", "[pt2][diff]") {
  TempDir dir;
  const std::string original = testdata("pt2/mlp_dynamic.pt2");
  CHECK(run_cli({"diff", original, original}).code == 0);
  DiffOptions options;
  const ArchiveDiff same = diff_files(original, original, options);
  CHECK(same.same());
  CHECK(same.tensors_matched == 4);  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  CHECK(same.tensors.empty());

  // fc1.bias (8 float32 in weight_1) with one element changed: by name, one element.
  const std::string path = copy_pt2(dir, "mlp_dynamic.pt2");
  const TorchArchive archive(open_file_source(original));
  std::string bias = archive.read(*archive.find("data/weights/weight_1"), 1024);
  REQUIRE(bias.size() == 32);
  const float changed = 1.5f;
  std::memcpy(&bias[4], &changed, 4);
  replace_record(path, "data/weights/weight_1", bias);
  REQUIRE(run_cli({"extra", "set", path, "owner=me"}).code == 0);
  const ArchiveDiff d = diff_files(original, path, options);
  CHECK_FALSE(d.same());
  REQUIRE(d.tensors.size() == 1);
  CHECK(d.tensors[0].path == "fc1.bias");
  CHECK(d.tensors[0].old_tensor.role == TensorRole::Parameter);
  CHECK(d.tensors[0].values.compared);
  CHECK(d.tensors[0].values.differing == 1);
  REQUIRE(d.extra.size() == 1);
  CHECK(d.extra[0].name == "owner");
  const CliResult cli = run_cli({"diff", original, path});
  CHECK(cli.code == 1);
  CHECK(cli.out.find("fc1.bias") != std::string::npos);

  // A changed program is shown as the diff of its graph, one line per node.
  const std::string program = archive.read(*archive.find("models/model.json"), 1 << 20);
  std::string sigmoid = program;
  const size_t at = sigmoid.find("torch.ops.aten.relu.default");
  REQUIRE(at != std::string::npos);
  sigmoid.replace(at, std::strlen("torch.ops.aten.relu.default"), "torch.ops.aten.sigmoid.default");
  replace_record(path, "models/model.json", sigmoid);
  const ArchiveDiff graph = diff_files(original, path, options);
  REQUIRE(graph.code.size() == 1);
  CHECK(graph.code[0].record == "models/model.json");
  CHECK(graph.code[0].diff.lines_removed == 1);
  CHECK(graph.code[0].diff.lines_added == 1);
  CHECK(graph.code[0].diff.unified.find("+  %relu: float32[s77, 8] = aten.sigmoid.default(%linear)\n") !=
        std::string::npos);

  // Constants are compared as well (buffers_consts has two).
  const ArchiveDiff consts = diff_files(testdata("pt2/buffers_consts.pt2"), testdata("pt2/buffers_consts.pt2"), options);
  CHECK(consts.tensors_matched == 5);  // 3 weights, 2 constants
}

TEST_CASE("pt2 inspect --graph: the program's nodes from its JSON", "[pt2][graph]") {
  const TorchArchive archive(open_file_source(testdata("pt2/mlp_dynamic.pt2")));
  const MethodGraph g = pt2_method_graph(archive, "");
  CHECK(g.method == "model");
  CHECK(g.schema == "model(%x: float32[s77, 4])");
  CHECK(g.text.find("  %x: float32[s77, 4]  (user_input)\n") != std::string::npos);
  CHECK(g.text.find("  %p_fc1_weight: float32[8, 4]  (parameter fc1.weight)\n") != std::string::npos);
  CHECK(g.text.find("= aten.linear.default(%x, %p_fc1_weight, %p_fc1_bias)\n") != std::string::npos);
  CHECK(g.text.find("  return (%linear_1)\n") != std::string::npos);
  // Param, 3 nodes, Return; every value a node reads is one the graph has.
  CHECK(g.nodes.size() == 5);
  CHECK(g.nodes.front().kind == "prim::Param");
  CHECK(g.nodes.back().kind == "prim::Return");

  const CliResult text = run_cli({"inspect", "--graph", testdata("pt2/buffers_consts.pt2")});
  CHECK(text.code == 0);
  CHECK(text.out.find("aten.mul.Tensor(%x, %p_scale)") != std::string::npos);
  CHECK(text.out.find("dtype=float64") != std::string::npos);
  const CliResult dot = run_cli({"inspect", "--graph", "--format", "dot", testdata("pt2/mlp_dynamic.pt2")});
  CHECK(dot.code == 0);
  CHECK(dot.out.rfind("digraph \"model\" {", 0) == 0);
  const CliResult doc = run_cli({"inspect", "--graph", "--json", testdata("pt2/mlp_dynamic.pt2")});
  CHECK(doc.code == 0);
  CHECK(json::parse(doc.out)["nodes"] == 3);
  const CliResult missing = run_cli({"inspect", "--graph", "-m", "other", testdata("pt2/mlp_dynamic.pt2")});
  CHECK(missing.code == 3);
  CHECK(missing.err.find("its programs: model") != std::string::npos);
  // A package keeps compiled code, not a program.
  CHECK(run_cli({"inspect", "--graph", testdata("pt2/mlp_dynamic_aoti.pt2")}).code == 3);
}
