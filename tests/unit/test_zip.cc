#include <catch2/catch.hpp>
#include <zlib.h>

#include "format/crc32.h"
#include "format/zip_format.h"
#include "helpers.h"
#include "format/archive.h"
#include "base/error.h"
#include "base/runtime_library.h"
#include "format/zip.h"

using namespace tsarchive;

namespace {
// The ZIP layer alone over `bytes` (archive_bytes.h's open_bytes opens a whole TorchArchive).
ZipArchive open_zip_bytes(std::string bytes) { return ZipArchive(make_memory_source(std::move(bytes), "mem.pt")); }
}  // namespace

TEST_CASE("zip: PyTorch's layout is read: ZIP64 end, FB padding, 64-byte alignment") {
  const ZipArchive zip = open_zip_bytes(slurp(testdata("mlp_scripted.pt")));
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
  const ZipArchive zip = open_zip_bytes(slurp(testdata("mlp_scripted.pt")));
  const ZipEntry* code = zip.find("mlp_scripted/code/__torch__/models.py");
  REQUIRE(code != nullptr);
  CHECK(code->method == 8);
  const std::string text = zip.read(*code, 1 << 20);
  CHECK(text.size() == code->uncompressed_size);
  CHECK_THAT(text, Catch::Contains("class MLP(Module):"));
}

TEST_CASE("zip: a flipped data byte fails the CRC check") {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive good = open_zip_bytes(bytes);
  const ZipEntry* pkl = good.find("mlp_scripted/data.pkl");
  REQUIRE(pkl != nullptr);
  bytes[pkl->data_offset + 10] ^= 0x01;
  const ZipArchive bad = open_zip_bytes(bytes);
  CHECK_THROWS_WITH(bad.read(*bad.find("mlp_scripted/data.pkl"), 1 << 20), Catch::Contains("data.pkl"));
}

TEST_CASE("zip: a declared size above the limit is refused before reading") {
  const ZipArchive zip = open_zip_bytes(slurp(testdata("mlp_scripted.pt")));
  const ZipEntry* pkl = zip.find("mlp_scripted/data.pkl");
  CHECK_THROWS_WITH(zip.read(*pkl, 10), Catch::Contains("above the 10-byte limit"));
}

TEST_CASE("zip: truncation anywhere is an error, never a crash") {
  const std::string bytes = slurp(testdata("mlp_scripted.pt"));
  for (size_t cut = 0; cut < bytes.size(); cut += 97) {
    INFO("cut at " << cut);
    CHECK_THROWS_AS(open_zip_bytes(bytes.substr(0, cut)), Error);
  }
}

TEST_CASE("zip: an end record that claims more entries than fit is refused") {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  // PyTorch always writes the ZIP64 end record (56 bytes) and locator (20)
  // before the classic 22-byte one; the ZIP64 counts are authoritative.
  const size_t z64 = bytes.size() - 22 - 20 - 56;
  REQUIRE(bytes.compare(z64, 4, "PK\x06\x06") == 0);
  for (size_t field : {24u, 32u}) bytes[z64 + field + 5] = '\x01';  // 2^40 entries
  // The classic counts say "see ZIP64" (0xFFFF), or the two records would disagree.
  for (size_t field : {8u, 9u, 10u, 11u}) bytes[bytes.size() - 22 + field] = '\xff';
  CHECK_THROWS_WITH(open_zip_bytes(bytes), Catch::Contains("more than the"));
}

TEST_CASE("zip: an entry whose offset points outside the archive is refused") {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive good = open_zip_bytes(bytes);
  // Corrupt the first central header's local header offset (at +42).
  const size_t cd = good.layout().central_directory_offset;
  bytes[cd + 42] = bytes[cd + 43] = bytes[cd + 44] = '\x7f';
  CHECK_THROWS_WITH(open_zip_bytes(bytes), Catch::Contains("invalid ZIP archive"));
}

TEST_CASE("zip: signature sniffing") {
  CHECK(has_zip_signature(*make_memory_source("PK\x03\x04rest")));
  CHECK_FALSE(has_zip_signature(*make_memory_source("PK")));
  CHECK_FALSE(has_zip_signature(*make_memory_source("hello world")));
}

// ---------------------------------------------------------------------------
// What tsarchive describes must be what PyTorch (miniz) loads.

namespace {

using zipfmt::set16;
using zipfmt::set32;

// mlp_scripted.pt with `comment` as its archive comment (comment length set).
std::string with_comment(const std::string& comment) {
  std::string bytes = slurp(testdata("mlp_scripted.pt"));
  REQUIRE(bytes.compare(bytes.size() - 22, 4, "PK\x05\x06") == 0);
  set16(bytes, bytes.size() - 2, static_cast<uint16_t>(comment.size()));
  return bytes + comment;
}

std::string what_of(const std::string& bytes) {
  try {
    open_zip_bytes(bytes);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("zip: an honest archive comment is read") {
  const ZipArchive zip = open_zip_bytes(with_comment("release 3, signed off"));
  CHECK(zip.layout().comment == "release 3, signed off");
  CHECK(zip.read(*zip.find("mlp_scripted/version"), 100) == "3\n");
}

TEST_CASE("zip: bytes after the archive are refused (miniz would ignore them, others not)") {
  const std::string bytes = slurp(testdata("mlp_scripted.pt"));
  CHECK_THAT(what_of(bytes + "xy"), Catch::Contains("invalid ZIP archive") && Catch::Contains("2 bytes follow it"));
  // A comment length that claims more than there is.
  CHECK_THAT(what_of(with_comment("abc").substr(0, bytes.size() + 2)), Catch::Contains("3-byte comment"));
}

TEST_CASE("zip: an archive hidden in the comment is refused, with or without trailing bytes") {
  // miniz takes the hidden archive's end record (the last signature with 22
  // bytes after it); a reader that trusts comment lengths takes the outer one.
  const std::string inner = slurp(testdata("tensor.pt"));
  CHECK_THAT(what_of(with_comment(inner + std::string(2, '\0'))), Catch::Contains("2 bytes follow it"));
  CHECK_THAT(what_of(with_comment(inner)), Catch::Contains("two end records"));
  CHECK_THAT(what_of(slurp(testdata("hostile/comment_hides_archive.pt"))), Catch::Contains("bytes follow it"));
  CHECK_THAT(what_of(slurp(testdata("hostile/comment_is_archive.pt"))), Catch::Contains("two end records"));
}

TEST_CASE("zip: a flatbuffer's identifier at bytes 4-7, or bytes before the first entry, are refused") {
  // libtorch's getFileFormat() reads a file with PTMF at offset 4 as a mobile flatbuffer model, before the ZIP.
  const std::string polyglot = slurp(testdata("hostile/view_zip_flatbuffer_polyglot.pt"));
  REQUIRE(polyglot.compare(4, 4, "PTMF") == 0);
  CHECK_THAT(what_of(polyglot), Catch::Contains("'PTMF'") && Catch::Contains("flatbuffer"));
  // The same 8 bytes without the identifier: still no entry covers them.
  std::string prefixed = polyglot;
  prefixed.replace(4, 4, std::string(4, '\0'));
  CHECK_THAT(what_of(prefixed), Catch::Contains("8 bytes before the first entry"));
}

TEST_CASE("zip: an end signature inside the comment is refused") {
  // Python's zipfile takes the last signature (rfind), even with < 22 bytes after it.
  CHECK_THAT(what_of(with_comment(std::string("ab") + "PK\x05\x06" + "0123456789")),
             Catch::Contains("comment holds an end record signature"));
  CHECK_THAT(what_of(with_comment("PK\x05\x06")), Catch::Contains("comment holds an end record signature"));
}

TEST_CASE("zip: the backward search for end records steps over near-misses and finds every candidate") {
  // The search finds each 'P' with memrchr and compares from there: runs of 'P'
  // and partial signatures are not end records, and one right after them is.
  CHECK(what_of(with_comment(std::string(40000, 'P') + "PK\x05PK\x06PK")).empty());
  CHECK_THAT(what_of(with_comment(std::string(40000, 'P') + "PPK\x05\x06")),
             Catch::Contains("comment holds an end record signature"));
  const std::string inner = slurp(testdata("tensor.pt"));
  CHECK_THAT(what_of(with_comment("PPPK\x05" + inner)), Catch::Contains("two end records"));
}

TEST_CASE("zip: the ZIP64 end record must end at its locator and agree with the classic one") {
  const std::string good = slurp(testdata("mlp_scripted.pt"));
  const size_t end = good.size() - 22, locator = end - 20, z64 = locator - 56;
  REQUIRE(good.compare(z64, 4, "PK\x06\x06") == 0);
  REQUIRE(good.compare(locator, 4, "PK\x06\x07") == 0);
  std::string disks = good;
  set32(disks, locator + 16, 0);  // total disks 0: miniz refuses, Python reads it
  CHECK_THAT(what_of(disks), Catch::Contains("multi-disk"));
  std::string count = good;
  const uint16_t n = static_cast<uint16_t>(open_zip_bytes(good).entries().size());
  set16(count, end + 8, static_cast<uint16_t>(n - 1));
  set16(count, end + 10, static_cast<uint16_t>(n - 1));
  CHECK_THAT(what_of(count), Catch::Contains("end record and the ZIP64 end record disagree"));
  std::string placeholder = good;  // 0xFFFF stands for "see ZIP64": fine
  set16(placeholder, end + 8, 0xFFFF);
  set16(placeholder, end + 10, 0xFFFF);
  CHECK(open_zip_bytes(placeholder).entries().size() == n);
  CHECK_THAT(what_of(slurp(testdata("hostile/zip64_locator_elsewhere.pt"))),
             Catch::Contains("does not end where its locator starts"));
  CHECK_THAT(what_of(slurp(testdata("hostile/gap_before_end_records.pt"))),
             Catch::Contains("100 bytes lie between the central directory"));
  CHECK_THAT(what_of(slurp(testdata("hostile/cd_count_short.pt"))),
             Catch::Contains("the central directory holds 66 bytes more than its 22 entries"));
}

TEST_CASE("zip: names that differ only in ASCII case are refused, naming both") {
  for (const char* file : {"case_twin_data_pkl.pt", "case_twin_code.pt", "case_twin_extra.pt"}) {
    INFO(file);
    CHECK_THAT(what_of(slurp(testdata(std::string("hostile/") + file))), Catch::Contains("differ only in case"));
  }
  CHECK_THAT(what_of(slurp(testdata("hostile/case_twin_data_pkl.pt"))),
             Catch::Contains("'mlp_scripted/data.pkl' and 'mlp_scripted/DATA.pkl'"));
}

TEST_CASE("zip: a file entry marked a folder by its DOS attributes is refused (miniz would read none of it)") {
  const std::string good = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive zip = open_zip_bytes(good);
  const ZipEntry& data = *zip.find("mlp_scripted/data/2");
  std::string marked = good;
  set32(marked, static_cast<size_t>(data.central_offset) + 38, 0x10);  // external attributes
  CHECK_THAT(what_of(marked), Catch::Contains("entry 'mlp_scripted/data/2' is marked a folder (DOS attribute 0x10)"));
  std::string unix_mode = good;  // a Unix mode in the high half, as zip(1) writes: still a file
  set32(unix_mode, static_cast<size_t>(data.central_offset) + 38, 0x81a40000u);
  const ZipArchive file = open_zip_bytes(unix_mode);
  CHECK(file.find("mlp_scripted/data/2") != nullptr);
}

TEST_CASE("zip: local headers must agree with the central directory") {
  const std::string good = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive zip = open_zip_bytes(good);
  const ZipEntry& pkl = *zip.find("mlp_scripted/data.pkl");
  const size_t at = static_cast<size_t>(pkl.local_header_offset);
  // PyTorch 1.13 writes bit 3 and zero CRC and sizes locally: accepted.
  REQUIRE((pkl.flags & 0x8) != 0);
  REQUIRE(good.compare(at + 14, 12, std::string(12, '\0')) == 0);

  std::string method = good;
  set16(method, at + 8, 8);
  CHECK_THAT(what_of(method), Catch::Contains("local header says compression method 'deflated'"));
  std::string encrypted = good;
  set16(encrypted, at + 6, 0x0809);
  CHECK_THAT(what_of(encrypted), Catch::Contains("disagree on encryption"));
  std::string real = good;  // the real values locally, as other writers do: accepted
  set32(real, at + 14, pkl.crc32);
  set32(real, at + 18, static_cast<uint32_t>(pkl.compressed_size));
  set32(real, at + 22, static_cast<uint32_t>(pkl.uncompressed_size));
  CHECK(open_zip_bytes(real).read(*open_zip_bytes(real).find("mlp_scripted/data.pkl"), 1 << 20).size() == 1096);
  std::string crc = real;
  set32(crc, at + 14, pkl.crc32 ^ 1);
  CHECK_THAT(what_of(crc), Catch::Contains("local header's CRC-32 differs"));
  std::string size = good;  // bit 3 excuses zeros, not other values
  set32(size, at + 22, 100);
  CHECK_THAT(what_of(size), Catch::Contains("local header's sizes"));
  std::string no_bit3 = good;  // zeros without bit 3 are sizes, and wrong
  set16(no_bit3, at + 6, 0x0800);
  CHECK_THAT(what_of(no_bit3), Catch::Contains("differs"));
  for (const char* file : {"local_method_differs.pt", "local_encrypted_flag.pt", "local_crc_differs.pt",
                           "local_sizes_differ.pt"}) {
    INFO(file);
    CHECK_THAT(what_of(slurp(testdata(std::string("hostile/") + file))), Catch::Contains("local header"));
  }
}

TEST_CASE("zip: every real archive in testdata opens and reads (no false refusals)") {
  for (const char* file : {"mlp_scripted.pt", "mlp_scripted_v2.pt", "mlp.ptl", "convnet_traced.pt", "dtypes.pt",
                           "dtypes_v2.pt", "frozen.pt", "gru_scripted.pt", "quant_dynamic.pt", "state_dict.pth",
                           "tensor.pt", "inputs/short_storage.pt", "hostile/ok_rebuilt.pt",
                           "hostile/junk_after_in_comment.pt", "hostile/plain_zip.zip"}) {
    INFO(file);
    const ZipArchive zip = open_zip_bytes(slurp(testdata(file)));
    for (const ZipEntry& e : zip.entries()) CHECK(zip.read(e, 1 << 24).size() == e.uncompressed_size);
  }
}

TEST_CASE("zip: ZipEntryReader streams exactly the layout's bytes, bounded and CRC-checked") {
  const std::string bytes = slurp(testdata("mlp_scripted.pt"));
  const ZipArchive zip = open_zip_bytes(bytes);
  ZipEntryReader reader(zip.source());
  for (const ZipEntry& e : zip.entries()) {
    INFO(e.name);
    std::string got;
    const ZipContentCheck check =
        reader.read(e, [&](const unsigned char* p, size_t n) { got.append(reinterpret_cast<const char*>(p), n); });
    CHECK(check.problem.empty());
    CHECK(check.crc_ok);
    CHECK(check.size == e.uncompressed_size);
    CHECK(got == zip.read(e, 1 << 24));
  }
  // A deflated record whose declared size is smaller than its content stops there.
  ZipEntry code = *zip.find("mlp_scripted/code/__torch__/models.py");
  ZipEntry lying = code;
  lying.uncompressed_size = 100;
  size_t seen = 0;
  ZipContentCheck check = reader.read(lying, [&](const unsigned char*, size_t n) { seen += n; });
  CHECK_THAT(check.problem, Catch::Contains("inflates to more than its declared 100 bytes"));
  CHECK(seen <= 100);
  // A deflate stream cut short.
  ZipEntry cut = code;
  cut.compressed_size -= 20;
  CHECK_THAT(reader.read(cut, [](const unsigned char*, size_t) {}).problem, Catch::Contains("ends early"));
  // Content longer than declared but a correct CRC of the declared prefix is still refused.
  ZipEntry longer = code;
  longer.uncompressed_size += 1;
  CHECK_THAT(reader.read(longer, [](const unsigned char*, size_t) {}).problem, Catch::Contains("holds 649 bytes"));
}

TEST_CASE("zip: libzip's view is cross-checked once and agrees on real archives") {
  const ZipArchive zip = open_zip_bytes(slurp(testdata("gru_scripted.pt")));
  CHECK_NOTHROW(zip.cross_check());
  CHECK_NOTHROW(zip.cross_check());
}

TEST_CASE("zip: a local extra field longer than PyTorch's padding is read whole") {
  using zipfmt::put16;
  using zipfmt::put32;
  // The local header, name and a usual extra come in one read; a longer extra
  // (here 300 bytes of an unknown field, as another writer may add) needs a
  // second read, and the entry's data must still start where it says.
  const std::string name = "m/data.pkl", data = "payload";
  const std::string extra = [] {
    std::string e;
    put16(e, 0xCAFE);
    put16(e, 296);
    e += std::string(296, 'x');
    return e;
  }();
  const uint32_t crc = static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
  std::string zip;
  const auto header = [&](uint32_t sig, bool central) {
    put32(zip, sig);
    if (central) put16(zip, 20);  // version made by
    put16(zip, 20);               // version needed
    put16(zip, 0);                // flags
    put16(zip, 0);                // stored
    put32(zip, 0);                // DOS time and date
    put32(zip, crc);
    put32(zip, static_cast<uint32_t>(data.size()));
    put32(zip, static_cast<uint32_t>(data.size()));
    put16(zip, static_cast<uint16_t>(name.size()));
    put16(zip, static_cast<uint16_t>(central ? 0 : extra.size()));
    if (central) {
      put16(zip, 0);  // comment length
      put16(zip, 0);  // disk
      put16(zip, 0);  // internal attributes
      put32(zip, 0);  // external attributes
      put32(zip, 0);  // local header offset
    }
    zip += name;
    if (!central) zip += extra;
  };
  header(0x04034b50, false);
  zip += data;
  const size_t cd_offset = zip.size();
  header(0x02014b50, true);
  const size_t cd_size = zip.size() - cd_offset;
  put32(zip, 0x06054b50);
  put32(zip, 0);  // disk numbers
  put16(zip, 1);
  put16(zip, 1);
  put32(zip, static_cast<uint32_t>(cd_size));
  put32(zip, static_cast<uint32_t>(cd_offset));
  put16(zip, 0);  // comment length

  const ZipArchive archive = open_zip_bytes(zip);
  const ZipEntry* e = archive.find(name);
  REQUIRE(e != nullptr);
  CHECK(e->local_extra_length == extra.size());
  CHECK(e->data_offset == 30 + name.size() + extra.size());
  CHECK(archive.read(*e, 100) == data);
}

namespace {

// A stored ZIP of `count` small records "m/r<i>" holding "data <i>".
std::string small_records_zip(int count) {
  using zipfmt::put16;
  using zipfmt::put32;
  std::string zip, central;
  for (int i = 0; i < count; ++i) {
    const std::string name = "m/r" + std::to_string(i), data = "data " + std::to_string(i);
    const uint32_t crc = static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
    const uint32_t offset = static_cast<uint32_t>(zip.size());
    for (std::string* out : {&zip, &central}) {
      const bool is_central = out == &central;
      put32(*out, is_central ? zipfmt::kCentralHeaderSig : zipfmt::kLocalHeaderSig);
      if (is_central) put16(*out, 20);  // version made by
      put16(*out, 20);                  // version needed
      put32(*out, 0);                   // flags, stored
      put32(*out, 0);                   // DOS time and date
      put32(*out, crc);
      put32(*out, static_cast<uint32_t>(data.size()));
      put32(*out, static_cast<uint32_t>(data.size()));
      put16(*out, static_cast<uint16_t>(name.size()));
      put16(*out, 0);  // extra
      if (is_central) {
        put32(*out, 0);  // comment length, disk
        put16(*out, 0);  // internal attributes
        put32(*out, 0);  // external attributes
        put32(*out, offset);
      }
      *out += name;
    }
    zip += data;
  }
  const uint32_t cd_offset = static_cast<uint32_t>(zip.size()), cd_size = static_cast<uint32_t>(central.size());
  zip += central;
  put32(zip, zipfmt::kEndSig);
  put32(zip, 0);  // disks
  put16(zip, static_cast<uint16_t>(count));
  put16(zip, static_cast<uint16_t>(count));
  put32(zip, cd_size);
  put32(zip, cd_offset);
  put16(zip, 0);  // comment length
  return zip;
}

// Counts the reads made of a source.
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(std::string bytes) : inner_(make_memory_source(std::move(bytes), "mem.zip")) {}
  uint64_t size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  void read_at(uint64_t offset, void* out, size_t length) const override {
    ++reads;
    inner_->read_at(offset, out, length);
  }
  mutable int reads = 0;

 private:
  std::unique_ptr<ByteSource> inner_;
};

}  // namespace

TEST_CASE("zip: thousands of small records cost a few reads, ours and libzip's") {
  // Reading each local header and each central record on its own took 3 reads
  // per record (6,000 for a 2,000-record archive): runs of headers are read
  // in one go, and libzip's record-by-record reads come from a read-ahead block.
  constexpr int kRecords = 3000;
  auto owned = std::make_unique<CountingSource>(small_records_zip(kRecords));
  const CountingSource& source = *owned;
  const ZipArchive zip(std::move(owned));
  REQUIRE(zip.entries().size() == kRecords);
  CHECK(source.reads < 20);
  const int layout_reads = source.reads;
  zip.cross_check();
  CHECK(source.reads - layout_reads < 20);
  for (int i : {0, 1, 1234, kRecords - 1}) {  // every header in its place: data where each says
    const ZipEntry& e = zip.entries()[static_cast<size_t>(i)];
    CHECK(e.name == "m/r" + std::to_string(i));
    CHECK(zip.read(e, 100) == "data " + std::to_string(i));
  }
}

TEST_CASE("runtime library: a missing library or function is one clear I/O error") {
  const Error missing = error_of([] { RuntimeLibrary("libtsarchive-no-such-library.so.9", "install it"); }, ErrorKind::Io,
                                 "cannot load this shared library");
  CHECK(missing.file() == "libtsarchive-no-such-library.so.9");
  CHECK(missing.hint() == "install it");
  const RuntimeLibrary libc("libc.so.6", "");
  int (*no_such)() = nullptr;
  error_of([&] { libc.bind("tsarchive_no_such_function", no_such); }, ErrorKind::Io,
           "it has no tsarchive_no_such_function()");
  size_t (*length)(const char*) = nullptr;
  libc.bind("strlen", length);
  CHECK(length("four") == 4);
}

TEST_CASE("crc32: equals zlib's at every length and alignment around the folding blocks") {
  std::string bytes(4096, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t offset = 0; offset < 17; ++offset) {
    for (size_t n = 0; n < 600; ++n) {
      INFO("offset " << offset << ", length " << n);
      REQUIRE(crc32_update(0, p + offset, n) == static_cast<uint32_t>(::crc32_z(0, p + offset, n)));
    }
  }
  uint32_t chained = 0;  // continued across pieces that do not fall on block boundaries
  for (size_t at = 0; at < bytes.size(); at += 333) chained = crc32_update(chained, p + at, std::min<size_t>(333, bytes.size() - at));
  CHECK(chained == static_cast<uint32_t>(::crc32_z(0, p, bytes.size())));
  CHECK(crc32_of("123456789") == 0xCBF43926u);  // the standard check value
}

TEST_CASE("zip: a big stored record read with its CRC on a second thread gives the same bytes and verdict") {
  std::string weights(5 * (1 << 20) + 12345, '\0');
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>((i * 40503u) >> 7);
  std::string bytes = archive_with_record(testdata("mlp_scripted.pt"), "data/0", weights);
  auto read_all = [](const std::string& zip_bytes, bool beside) {
    const ZipArchive zip = open_zip_bytes(zip_bytes);
    const ZipEntry* e = zip.find("mlp_scripted/data/0");
    REQUIRE(e != nullptr);
    REQUIRE(e->method == 0);
    ZipEntryReader reader(zip.source());
    reader.crc_beside_sink(beside);
    std::string seen;
    const ZipContentCheck check = reader.read(*e, [&](const unsigned char* d, size_t n) { seen.append(reinterpret_cast<const char*>(d), n); });
    return std::make_pair(check, seen);
  };
  const auto [plain, plain_bytes] = read_all(bytes, false);
  const auto [beside, beside_bytes] = read_all(bytes, true);
  CHECK(plain.crc_ok);
  CHECK(beside.crc_ok);
  CHECK(beside.size == weights.size());
  CHECK(beside_bytes == weights);
  CHECK(plain_bytes == weights);

  const size_t at = bytes.find(weights.substr(3 << 20, 64));  // a byte in the third chunk
  REQUIRE(at != std::string::npos);
  bytes[at] = static_cast<char>(bytes[at] ^ 1);
  const auto [flipped, flipped_bytes] = read_all(bytes, true);
  CHECK_FALSE(flipped.crc_ok);
  CHECK(flipped.problem.find("CRC-32") != std::string::npos);

  // A sink that throws mid-record: the exception comes out once the CRC
  // thread is done with the buffers, and the reader reads the next one whole.
  const ZipArchive zip = open_zip_bytes(bytes);
  const ZipEntry* e = zip.find("mlp_scripted/data/0");
  REQUIRE(e != nullptr);
  ZipEntryReader reader(zip.source());
  reader.crc_beside_sink(true);
  size_t chunks = 0;
  CHECK_THROWS_WITH(reader.read(*e, [&](const unsigned char*, size_t) {
                      if (++chunks == 2) throw std::runtime_error("sink failed");
                    }),
                    "sink failed");
  CHECK(chunks == 2);
  CHECK(reader.read(*e, [](const unsigned char*, size_t) {}).size == weights.size());
}
