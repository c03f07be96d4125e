#include <catch2/catch.hpp>

#include <functional>

#include "helpers.h"
#include "format/archive.h"
#include "format/zip_writer.h"
#include "base/error.h"

using namespace tsarchive;

TEST_CASE("records are classified by their name under the top folder") {
  CHECK(classify_record("data.pkl") == RecordKind::Pickle);
  CHECK(classify_record("constants.pkl") == RecordKind::Pickle);
  CHECK(classify_record("bytecode.pkl") == RecordKind::Bytecode);
  CHECK(classify_record("data/0") == RecordKind::TensorData);
  CHECK(classify_record("constants/12") == RecordKind::ConstantData);
  CHECK(classify_record("code/__torch__/a.py") == RecordKind::Code);
  CHECK(classify_record("code/__torch__/a.py.debug_pkl") == RecordKind::DebugInfo);
  CHECK(classify_record("extra/labels.json") == RecordKind::Extra);
  CHECK(classify_record("extra/x.debug_pkl") == RecordKind::Extra);
  CHECK(classify_record("version") == RecordKind::Version);
  CHECK(classify_record(".data/version") == RecordKind::Version);
  CHECK(classify_record("byteorder") == RecordKind::ByteOrder);
  CHECK(classify_record(".data/serialization_id") == RecordKind::SerializationId);
  CHECK(classify_record("traced_inputs.pkl") == RecordKind::TracedInputs);
  CHECK(classify_record("traced_inputs/0") == RecordKind::TracedInputs);
  CHECK(classify_record("something/else") == RecordKind::Other);
}

TEST_CASE("file kinds are told apart from content, not names") {
  CHECK(TorchArchive(open_file_source(testdata("mlp_scripted.pt"))).kind() == FileKind::TorchScript);
  CHECK(TorchArchive(open_file_source(testdata("frozen.pt"))).kind() == FileKind::TorchScript);
  CHECK(TorchArchive(open_file_source(testdata("mlp.ptl"))).kind() == FileKind::LiteInterpreter);
  CHECK(TorchArchive(open_file_source(testdata("state_dict.pth"))).kind() == FileKind::TorchSave);
  CHECK(detect_file_kind(*open_file_source(testdata("legacy_state_dict.pth"))) == FileKind::LegacyTorchSave);
  CHECK(detect_file_kind(*open_file_source(testdata("model.onnx"))) == FileKind::Onnx);
  CHECK(detect_file_kind(*open_file_source(testdata("hostile/random.bin"))) == FileKind::NotAModel);
  CHECK(detect_file_kind(*open_file_source(testdata("hostile/not_zip.pt"))) == FileKind::NotAModel);
}

TEST_CASE("the version record is read like PyTorchStreamReader: .data/version first") {
  const TorchArchive a(open_file_source(testdata("mlp_scripted.pt")));
  const TorchArchive::Version v = a.format_version();
  REQUIRE(v.value);
  CHECK(*v.value == 3);
  CHECK(v.record == "version");
}

TEST_CASE("opening problems name the file and say what to do") {
  try {
    open_file_source(testdata("no_such_file.pt"));
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
    CHECK_THAT(e.file(), Catch::EndsWith("no_such_file.pt"));
    CHECK_FALSE(e.hint().empty());
  }
  CHECK_THROWS_AS(open_file_source(TSARCHIVE_TESTDATA_DIR), Error);
}

namespace {
// mlp_scripted.pt with every record renamed by `rename` (below the top folder).
std::string renamed_archive(const std::function<std::string(const std::string&)>& rename) {
  const TorchArchive archive(open_file_source(testdata("mlp_scripted.pt")));
  std::vector<ZipEntrySpec> entries;
  for (const Record& r : archive.records()) {
    entries.push_back(ZipEntrySpec::create(archive.top_folder() + "/" + rename(r.name), archive.read(r, 1 << 20)));
  }
  const ByteSource& source = archive.zip().source();
  const ZipRewritePlan plan = plan_zip_rewrite(source, archive.zip().layout(), entries);
  return render_plan(plan, 0, [&](uint64_t at, char* out, size_t n) { source.read_at(at, out, n); });
}
}  // namespace

TEST_CASE("records are found and classified as libtorch finds them: ignoring ASCII case") {
  const TorchArchive upper(make_memory_source(renamed_archive([](const std::string& name) {
    return name.rfind("code/", 0) == 0 ? "CODE/" + name.substr(5) : name == "constants.pkl" ? "CONSTANTS.pkl" : name;
  })));
  CHECK(upper.kind() == FileKind::TorchScript);
  const Record* constants = upper.find("constants.pkl");
  REQUIRE(constants != nullptr);
  CHECK(constants->name == "CONSTANTS.pkl");
  size_t code = 0;
  for (const Record& r : upper.records()) code += r.kind == RecordKind::Code ? 1 : 0;
  CHECK(code > 0);
  CHECK(upper.find("Data.PKL") == upper.find("data.pkl"));
  CHECK(upper.find("data.pkl") != nullptr);
}

TEST_CASE("a record name longer than PyTorch's reader keeps is refused") {
  const std::string long_bytes = renamed_archive([](const std::string& name) {
    return name == "version" ? std::string(kMaxRecordName, 'v') : name;
  });
  const Error e = error_of([&] { TorchArchive(make_memory_source(long_bytes)); });
  CHECK(e.kind() == ErrorKind::BadInput);
  CHECK_THAT(e.what(), Catch::Contains("keeps the first 511 bytes"));
}

TEST_CASE("a folder entry with data is refused; an empty one, as zip -r writes, is not a record") {
  const std::string with_data = renamed_archive([](const std::string& name) {
    return name == "extra/labels.json" ? std::string("extra/injected/") : name;  // its bytes under a folder's name
  });
  const Error e = error_of([&] { TorchArchive(make_memory_source(with_data)); });
  CHECK(e.kind() == ErrorKind::BadInput);
  CHECK_THAT(e.what(), Catch::Contains("/extra/injected/' is a folder with"));
  CHECK_THAT(e.what(), Catch::Contains("bytes of data"));
}
