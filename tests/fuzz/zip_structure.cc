// tsarchive::fuzz::zip_structure (fuzz_entry.h): ZIP structure mutations of a
// small PyTorch-shaped archive, and the invariant that whenever our layout
// parser accepts a file, the other readers read the same archive from it:
// - miniz (PyTorch): its end-record choice, reimplemented below from
//   mz_zip_reader_locate_header_sig (last "PK\5\6" with >= 22 bytes after it,
//   searched backwards in 4 KiB chunks);
// - Python's zipfile: its _EndRecData (the last 22 bytes with a zero comment
//   length, else rfind of the signature) and _EndRecData64 (the ZIP64 end
//   record right before the locator);
// - libzip, opened on its own: same entries (names, sizes, CRCs, methods) and
//   comment whenever the archive's own libzip cross-check (done before any
//   read) passes; refusing more is fine.
// Each names record lookups the way miniz does (ASCII case-insensitively), so
// accepted names must be unique that way, and local headers must carry the
// central method. A broken invariant throws std::logic_error: the replay test
// reports it as escaped, libFuzzer as a crash.
#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_entry.h"
#include "base/error.h"
#include "format/zip.h"

namespace tsarchive::fuzz {
namespace {

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xFF);
  s += static_cast<char>((v >> 8) & 0xFF);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}
void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}
uint32_t get16(const std::string& s, size_t at) {
  return static_cast<unsigned char>(s[at]) | static_cast<unsigned char>(s[at + 1]) << 8;
}

std::string raw_deflate(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// One entry: every header field separately, so a mutation can make one lie.
struct Entry {
  std::string central_name, local_name, data, body;
  uint32_t central_method = 0, local_method = 0, central_flags = 0x0808, local_flags = 0x0808;
  uint32_t central_crc = 0, local_crc = 0, central_csize = 0, local_csize = 0, central_usize = 0, local_usize = 0;
  bool descriptor = true;
};

Entry make_entry(const std::string& name, const std::string& data, bool deflated) {
  Entry e;
  e.central_name = e.local_name = name;
  e.data = data;
  e.body = deflated ? raw_deflate(data) : data;
  e.central_method = e.local_method = deflated ? 8 : 0;
  e.central_crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
  e.central_csize = static_cast<uint32_t>(e.body.size());
  e.central_usize = static_cast<uint32_t>(data.size());
  return e;  // local CRC and sizes zero, as PyTorch 1.13 writes them (bit 3)
}

struct Plan {
  std::vector<Entry> entries;
  std::string comment;
  std::string gap;  // bytes between the central directory and the end records
  std::string trailing;
  bool zip64 = true;
  bool zip64_copy = false;  // a second ZIP64 end record; the locator points at the first
  uint32_t locator_disk = 0, locator_total = 1;
  int64_t classic_count = -1, comment_len = -1;  // overrides (-1: the truth)
  uint64_t shift = 0;                            // added to every offset
};

Plan seed_plan() {
  Plan p;
  p.entries.push_back(make_entry("m/data.pkl", std::string("\x80\x02N.", 4), false));
  p.entries.push_back(make_entry("m/code/__torch__/m.py",
                                 "class M(Module):\n  __parameters__ = []\n  __buffers__ = []\n"
                                 "  def forward(self: __torch__.M, x: Tensor) -> Tensor:\n    return x\n",
                                 true));
  p.entries.push_back(make_entry("m/extra/labels.json", "[\"a\", \"b\"]", false));
  p.entries.push_back(make_entry("m/version", "3\n", false));
  return p;
}

std::string serialize(const Plan& p) {
  std::string out;
  std::vector<uint64_t> offsets;
  for (const Entry& e : p.entries) {
    offsets.push_back(out.size() + p.shift);
    put32(out, 0x04034b50);
    put16(out, 20);
    put16(out, e.local_flags);
    put16(out, e.local_method);
    put32(out, 0);
    put32(out, e.local_crc);
    put32(out, e.local_csize);
    put32(out, e.local_usize);
    put16(out, static_cast<uint32_t>(e.local_name.size()));
    put16(out, 0);
    out += e.local_name;
    out += e.body;
    if (e.descriptor) {
      put32(out, 0x08074b50);
      put32(out, e.central_crc);
      put32(out, e.central_csize);
      put32(out, e.central_usize);
    }
  }
  const uint64_t cd_offset = out.size() + p.shift;
  for (size_t i = 0; i < p.entries.size(); ++i) {
    const Entry& e = p.entries[i];
    put32(out, 0x02014b50);
    put16(out, 0x031E);
    put16(out, 20);
    put16(out, e.central_flags);
    put16(out, e.central_method);
    put32(out, 0);
    put32(out, e.central_crc);
    put32(out, e.central_csize);
    put32(out, e.central_usize);
    put16(out, static_cast<uint32_t>(e.central_name.size()));
    put32(out, 0);  // extra, comment lengths
    put32(out, 0);  // disk, internal attributes
    put32(out, 0);  // external attributes
    put32(out, static_cast<uint32_t>(offsets[i]));
    out += e.central_name;
  }
  const uint64_t cd_size = out.size() + p.shift - cd_offset;
  out += p.gap;
  const uint64_t n = p.entries.size();
  if (p.zip64) {
    const uint64_t z64_at = out.size() + p.shift;
    for (int copy = 0; copy < (p.zip64_copy ? 2 : 1); ++copy) {
      put32(out, 0x06064b50);
      put64(out, 44);
      put16(out, 0x031E);
      put16(out, 45);
      put32(out, 0);
      put32(out, 0);
      put64(out, n);
      put64(out, n);
      put64(out, cd_size);
      put64(out, cd_offset);
    }
    put32(out, 0x07064b50);
    put32(out, p.locator_disk);
    put64(out, z64_at);
    put32(out, p.locator_total);
  }
  const uint32_t count = static_cast<uint32_t>(p.classic_count >= 0 ? p.classic_count : static_cast<int64_t>(n));
  put32(out, 0x06054b50);
  put32(out, 0);
  put16(out, count & 0xFFFF);
  put16(out, count & 0xFFFF);
  put32(out, static_cast<uint32_t>(cd_size));
  put32(out, static_cast<uint32_t>(cd_offset));
  put16(out, static_cast<uint32_t>(p.comment_len >= 0 ? p.comment_len : static_cast<int64_t>(p.comment.size())));
  out += p.comment;
  out += p.trailing;
  return out;
}

// Reads the fuzz input as a little program of mutations.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool more() const { return pos_ < size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t u32() { return u8() | u8() << 8 | u8() << 16 | static_cast<uint32_t>(u8()) << 24; }
  std::string bytes(size_t n) {
    n = std::min(n, size_ - pos_);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void flip_case(std::string& name, size_t k) {
  if (name.empty()) return;
  char& c = name[k % name.size()];
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  else if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
}

// A field value: mostly the interesting ones.
uint32_t pick(Input& in, uint32_t truth) {
  switch (in.u8() % 5) {
    case 0: return 0;
    case 1: return truth;
    case 2: return truth + 1;
    case 3: return 0xFFFFFFFFu;
    default: return in.u32();
  }
}

std::string mutate(const uint8_t* data, size_t size) {
  Plan p = seed_plan();
  Input in(data, size);
  std::vector<std::pair<uint32_t, uint8_t>> pokes;
  for (int steps = 0; in.more() && steps < 16; ++steps) {
    const uint8_t op = in.u8();
    Entry& e = p.entries[in.u8() % p.entries.size()];
    switch (op % 20) {
      case 0: { const uint8_t k = in.u8(); flip_case(e.central_name, k); flip_case(e.local_name, k); break; }
      case 1: flip_case(e.central_name, in.u8()); break;
      case 2: {  // a second entry whose name differs in case only
        std::string name = e.central_name;
        flip_case(name, in.u8());
        Entry twin = make_entry(name, e.data + "!", e.central_method == 8);
        p.entries.push_back(std::move(twin));
        break;
      }
      case 3: e.local_method = pick(in, e.central_method) & 0xFFFF; break;
      case 4: e.local_flags = pick(in, e.central_flags) & 0xFFFF; break;
      case 5: e.local_crc = pick(in, e.central_crc); break;
      case 6: e.local_csize = pick(in, e.central_csize); break;
      case 7: e.local_usize = pick(in, e.central_usize); break;
      case 8: e.central_crc = pick(in, e.central_crc); break;
      case 9: e.central_usize = pick(in, e.central_usize); break;
      case 10: p.comment = in.bytes(in.u8()); break;
      case 11: {  // a whole archive B in the comment, with offsets for where it lands
        Plan b = seed_plan();
        b.entries[0] = make_entry("m/data.pkl", std::string("\x80\x02K\x07.", 5), false);
        b.shift = in.u8() % 2 == 0 ? serialize(p).size() - p.comment.size() - p.trailing.size() : 0;
        p.comment = serialize(b) + std::string(in.u8() % 4, '\0');
        break;
      }
      case 12: p.trailing = in.bytes(in.u8() % 64); break;
      case 13: p.gap = std::string(in.u8() % 80, 'g'); break;
      case 14: p.zip64 = !p.zip64; break;
      case 15: p.zip64_copy = !p.zip64_copy; break;
      case 16: p.locator_disk = in.u8() % 3; p.locator_total = in.u8() % 3; break;
      case 17: p.classic_count = in.u8() % 2 == 0 ? 0xFFFF : static_cast<int64_t>(in.u8() % 8); break;
      case 18: p.comment_len = in.u32() & 0xFFFF; break;
      default: pokes.emplace_back(in.u32(), in.u8()); break;  // one byte from the end
    }
  }
  std::string bytes = serialize(p);
  for (const auto& [at, value] : pokes) {
    if (!bytes.empty()) bytes[bytes.size() - 1 - at % std::min<size_t>(bytes.size(), 512)] = static_cast<char>(value);
  }
  return bytes;
}

[[noreturn]] void broken(const std::string& what) { throw std::logic_error("zip_structure invariant: " + what); }

// mz_zip_reader_locate_header_sig (miniz 2.x, PyTorch's third_party/miniz).
int64_t miniz_end_record(const std::string& f) {
  const int64_t size = static_cast<int64_t>(f.size());
  if (size < 22) return -1;
  int64_t cur = std::max<int64_t>(size - 4096, 0);
  for (;;) {
    const int n = static_cast<int>(std::min<int64_t>(4096, size - cur));
    int i = n - 4;
    for (; i >= 0; --i) {
      if (f.compare(static_cast<size_t>(cur + i), 4, "PK\x05\x06") == 0 && size - (cur + i) >= 22) break;
    }
    if (i >= 0) return cur + i;
    if (cur == 0 || size - cur >= 0xFFFF + 22) return -1;
    cur = std::max<int64_t>(cur - (4096 - 3), 0);
  }
}

// zipfile._EndRecData: the end record's offset, or -1 where Python fails.
int64_t python_end_record(const std::string& f) {
  const size_t size = f.size();
  if (size < 22) return -1;
  if (f.compare(size - 22, 4, "PK\x05\x06") == 0 && get16(f, size - 2) == 0) return static_cast<int64_t>(size - 22);
  const size_t start = size > 0x10000 + 22 ? size - 0x10000 - 22 : 0;
  const size_t at = f.rfind(std::string("PK\x05\x06", 4));
  if (at == std::string::npos || at < start || size - at < 22) return -1;
  return static_cast<int64_t>(at);
}

void check_views(const std::string& bytes) {
  std::unique_ptr<ZipArchive> zip;
  try {
    zip = std::make_unique<ZipArchive>(make_memory_source(bytes, "fuzz.zip"));
  } catch (const Error&) {
    return;  // refused: nothing to compare
  }
  const ZipLayout& layout = zip->layout();
  const int64_t ours = static_cast<int64_t>(layout.end_record_offset);
  if (miniz_end_record(bytes) != ours) broken("miniz takes another end record");
  if (python_end_record(bytes) != ours) broken("Python's zipfile takes another end record");
  if (layout.zip64) {
    if (layout.zip64_end_record_offset + 56 + 20 != layout.end_record_offset) {
      broken("Python's zipfile looks for the ZIP64 end record elsewhere");
    }
  } else if (ours >= 20 && bytes.compare(static_cast<size_t>(ours) - 20, 4, "PK\x06\x07") == 0) {
    broken("a ZIP64 locator that the layout ignored");
  }
  // zipfile._RealGetContents shifts every offset by the bytes between the
  // central directory and the end records ("concat"): there must be none.
  if (layout.end_record_offset - (layout.zip64 ? 76 : 0) !=
      layout.central_directory_offset + layout.central_directory_size) {
    broken("Python's zipfile shifts the offsets");
  }
  // It also walks central records until the size is used up.
  size_t walked = 0;
  for (uint64_t at = layout.central_directory_offset, end = at + layout.central_directory_size; at < end; ++walked) {
    if (at + 46 > end || bytes.compare(static_cast<size_t>(at), 4, "PK\x01\x02") != 0) {
      broken("Python's zipfile finds a broken central directory");
    }
    const size_t h = static_cast<size_t>(at);
    at += 46 + get16(bytes, h + 28) + get16(bytes, h + 30) + get16(bytes, h + 32);
    if (at > end) broken("Python's zipfile finds a central record past the directory");
  }
  if (walked != layout.entries.size()) broken("Python's zipfile counts other central records");
  std::set<std::string> folded;
  for (const ZipEntry& e : layout.entries) {
    std::string key = e.name;
    for (char& c : key) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (!folded.insert(key).second) broken("two names miniz cannot tell apart: " + e.name);
    const size_t lh = static_cast<size_t>(e.local_header_offset);
    if (get16(bytes, lh + 8) != e.method) broken("local and central methods differ: " + e.name);
    if ((get16(bytes, lh + 6) & 1) != 0) broken("an encrypted local header: " + e.name);
  }
  // Every read cross-checks with libzip first (ZipArchive::cross_check), and
  // a disagreement refuses the file there: the listing alone is miniz's and
  // Python's view, checked above. Past the cross-check, libzip opened on its
  // own over the same bytes must agree too.
  try {
    zip->cross_check();
  } catch (const Error&) {
    return;
  }
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  zip_t* za = src != nullptr ? zip_open_from_source(src, ZIP_RDONLY, &error) : nullptr;
  if (za == nullptr && src != nullptr) zip_source_free(src);
  zip_error_fini(&error);
  if (za != nullptr) {
    std::unique_ptr<zip_t, void (*)(zip_t*)> guard(za, zip_discard);
    if (zip_get_num_entries(za, 0) != static_cast<zip_int64_t>(layout.entries.size())) broken("libzip counts otherwise");
    int len = 0;
    const char* comment = zip_get_archive_comment(za, &len, ZIP_FL_ENC_RAW);
    if (std::string(comment != nullptr ? comment : "", comment != nullptr ? static_cast<size_t>(len) : 0) !=
        layout.comment) {
      broken("libzip reads another comment");
    }
    for (const ZipEntry& e : layout.entries) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(za, e.index, ZIP_FL_ENC_RAW, &st) != 0 || st.name == nullptr || e.name != st.name ||
          st.size != e.uncompressed_size || st.comp_size != e.compressed_size || st.crc != e.crc32 ||
          st.comp_method != static_cast<zip_int32_t>(e.method)) {
        broken("libzip reads entry " + std::to_string(e.index) + " otherwise");
      }
    }
  }
  for (const ZipEntry& e : layout.entries) {
    try {
      zip->read(e, 1 << 20);
    } catch (const Error&) {
    }
  }
}

}  // namespace

void zip_structure(const uint8_t* data, size_t size) {
  check_views(std::string(reinterpret_cast<const char*>(data), size));  // the input as an archive
  const std::string mutated = mutate(data, size);
  // To look at a crash: TSARCHIVE_FUZZ_DUMP=out.zip fuzz_zip_structure crash-...
  if (const char* dump = std::getenv("TSARCHIVE_FUZZ_DUMP")) {
    std::ofstream(dump, std::ios::binary) << mutated;
  }
  check_views(mutated);  // the input as mutations of the seed
}

}  // namespace tsarchive::fuzz
