#include <catch2/catch.hpp>

#include "helpers.h"
#include "format/archive.h"
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
