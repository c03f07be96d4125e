#include <catch2/catch.hpp>

#include "helpers.h"
#include "tsarchive/archive.h"
#include "tsarchive/error.h"
#include "tsarchive/zip.h"

using namespace tsarchive;

namespace {
ZipArchive open_bytes(std::string bytes) { return ZipArchive(make_memory_source(std::move(bytes), "mem.pt")); }
}  // namespace

TEST_CASE("zip: PyTorch's layout is read: ZIP64 end, FB padding, 64-byte alignment") {
  const ZipArchive zip = open_bytes(slurp(testdata("mlp_scripted.pt")));
  CHECK(zip.layout().zip64);
  REQUIRE_FALSE(zip.entries().empty());
  for (const ZipEntry& e : zip.entries()) {
    INFO(e.name);
    CHECK(e.has_alignment_padding);
    CHECK(e.data_offset % 64 == 0);
    CHECK(e.name.rfind("mlp_scripted/", 0) == 0);
  }
  const ZipEntry* version = zip.find("mlp_scripted/version");
  REQUIRE(version != nullptr);
  CHECK(zip.read(*version, 100) == "3\n");
}

TEST_CASE("zip: deflated code records are inflated") {
  const ZipArchive zip = open_bytes(slurp(testdata("mlp_scripted.pt")));
  const ZipEntry* code = zip.find("mlp_scripted/code/__torch__/models.py");
  REQUIRE(code != nullptr);
  CHECK(code->method == 8);
  const std::string text = zip.read(*code, 1 << 20);
  CHECK(text.size() == code->uncompressed_size);
  CHECK_THAT(text, Catch::Contains("class MLP(Module):"));
}

TEST_CASE("zip: a flipped data byte fails the CRC check") {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive good = open_bytes(bytes);
  const ZipEntry* pkl = good.find("mlp_scripted/data.pkl");
  REQUIRE(pkl != nullptr);
  bytes[pkl->data_offset + 10] ^= 0x01;
  const ZipArchive bad = open_bytes(bytes);
  CHECK_THROWS_WITH(bad.read(*bad.find("mlp_scripted/data.pkl"), 1 << 20), Catch::Contains("data.pkl"));
}

TEST_CASE("zip: a declared size above the limit is refused before reading") {
  const ZipArchive zip = open_bytes(slurp(testdata("mlp_scripted.pt")));
  const ZipEntry* pkl = zip.find("mlp_scripted/data.pkl");
  CHECK_THROWS_WITH(zip.read(*pkl, 10), Catch::Contains("above the 10-byte limit"));
}

TEST_CASE("zip: truncation anywhere is an error, never a crash") {
  const std::string bytes = slurp(testdata("mlp_scripted.pt"));
  for (size_t cut = 0; cut < bytes.size(); cut += 97) {
    INFO("cut at " << cut);
    CHECK_THROWS_AS(open_bytes(bytes.substr(0, cut)), Error);
  }
}

TEST_CASE("zip: an end record that claims more entries than fit is refused") {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  // PyTorch always writes the ZIP64 end record (56 bytes) and locator (20)
  // before the classic 22-byte one; the ZIP64 counts are authoritative.
  const size_t z64 = bytes.size() - 22 - 20 - 56;
  REQUIRE(bytes.compare(z64, 4, "PK\x06\x06") == 0);
  for (size_t field : {24u, 32u}) bytes[z64 + field + 5] = '\x01';  // 2^40 entries
  CHECK_THROWS_WITH(open_bytes(bytes), Catch::Contains("more than the"));
}

TEST_CASE("zip: an entry whose offset points outside the archive is refused") {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive good = open_bytes(bytes);
  // Corrupt the first central header's local header offset (at +42).
  const size_t cd = good.layout().central_directory_offset;
  bytes[cd + 42] = bytes[cd + 43] = bytes[cd + 44] = '\x7f';
  CHECK_THROWS_WITH(open_bytes(bytes), Catch::Contains("invalid ZIP archive"));
}

TEST_CASE("zip: signature sniffing") {
  CHECK(has_zip_signature(*make_memory_source("PK\x03\x04rest")));
  CHECK_FALSE(has_zip_signature(*make_memory_source("PK")));
  CHECK_FALSE(has_zip_signature(*make_memory_source("hello world")));
}
