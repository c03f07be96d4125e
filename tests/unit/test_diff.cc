// diff: the line diff, tensor value comparison, and archive comparison on
// archives written by PyTorch (testdata/*_v2.pt, see testdata/README.md).
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "helpers.h"
#include "core/compare/diff.h"
#include "base/error.h"
#include "core/compare/tensor_values.h"
#include "core/compare/text_diff.h"

using namespace tsarchive;

namespace {

// ---- line diff ---------------------------------------------------------------

std::string numbered_lines(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t nl = text.find('\n', begin);
    nl = nl == std::string::npos ? text.size() : nl + 1;
    out.push_back(text.substr(begin, nl - begin));
    begin = nl;
  }
  return out;
}

// Applies a unified diff made by diff_text to `old_text`, checking every
// context and removed line against it, the way patch(1) would.
std::string apply_patch(const std::string& old_text, const std::string& patch) {
  const std::vector<std::string> old_lines = lines_of(old_text);
  const std::vector<std::string> patch_lines = lines_of(patch);
  std::vector<std::string> out;
  size_t next_old = 0;  // 0-based
  char previous = ' ';
  for (size_t p = 2; p < patch_lines.size(); ++p) {  // past ---/+++
    const std::string& line = patch_lines[p];
    if (line.rfind("@@ -", 0) == 0) {
      size_t start = std::stoul(line.substr(4));
      const size_t comma = line.find(',');
      const size_t space = line.find(' ', 4);
      const bool empty = comma != std::string::npos && comma < space && line.substr(comma, 3) == ",0 ";
      const size_t first = empty ? start : start - 1;
      REQUIRE(first >= next_old);
      while (next_old < first) out.push_back(old_lines.at(next_old++));
      continue;
    }
    if (line.rfind("\\ No newline", 0) == 0) {  // about the line before it
      if (previous != '-') {
        REQUIRE(out.back().back() == '\n');
        out.back().pop_back();
      }
      continue;
    }
    previous = line[0];
    const std::string body = line.substr(1);
    if (line[0] == ' ' || line[0] == '-') {
      const std::string& have = old_lines.at(next_old++);
      REQUIRE(have.substr(0, body.size()) == body.substr(0, have.size()));
      if (line[0] == ' ') out.push_back(body);
    } else {
      REQUIRE(line[0] == '+');
      out.push_back(body);
    }
  }
  while (next_old < old_lines.size()) out.push_back(old_lines[next_old++]);
  std::string text;
  for (const std::string& l : out) text += l;
  return text;
}

// Fewest inserted + deleted lines, by dynamic programming (small inputs).
size_t line_edit_distance(const std::string& a, const std::string& b) {
  const auto x = lines_of(a), y = lines_of(b);
  std::vector<std::vector<size_t>> lcs(x.size() + 1, std::vector<size_t>(y.size() + 1, 0));
  for (size_t i = x.size(); i-- > 0;) {
    for (size_t j = y.size(); j-- > 0;) {
      lcs[i][j] = x[i] == y[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  return x.size() + y.size() - 2 * lcs[0][0];
}

// ---- tensors -------------------------------------------------------------------

TensorInfo tensor(const std::string& dtype, std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t offset = 0) {
  TensorInfo t;
  t.path = "t";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.stride = std::move(stride);
  t.storage_offset = offset;
  return t;
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

TensorValueDiff compare(const TensorInfo& a, const std::string& sa, const TensorInfo& b, const std::string& sb) {
  StorageBytes x(sa), y(sb);
  return compare_tensor_values(a, x, b, y);
}

const TensorChange* find_tensor(const ArchiveDiff& d, const std::string& path) {
  for (const TensorChange& t : d.tensors) {
    if (t.path == path) return &t;
  }
  return nullptr;
}

const RecordChange* find_record(const ArchiveDiff& d, const std::string& name) {
  for (const RecordChange& r : d.records) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("text diff: the unified format of GNU diff -u") {
  const std::string a = numbered_lines(1, 10);
  std::string b = a;
  b.replace(b.find("line 5\n"), 7, "line five\n");
  const TextDiff d = diff_text(a, b, "a/x.py", "b/x.py");
  REQUIRE(d.computed);
  CHECK_FALSE(d.identical);
  CHECK(d.lines_added == 1);
  CHECK(d.lines_removed == 1);
  CHECK(d.old_lines == 10);
  CHECK(d.unified ==
        "--- a/x.py\n+++ b/x.py\n"
        "@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+line five\n line 6\n line 7\n line 8\n");

  SECTION("identical texts have no diff") {
    const TextDiff same = diff_text(a, a, "a", "b");
    CHECK(same.identical);
    CHECK(same.unified.empty());
  }
  SECTION("an added file is all '+', with an empty old range") {
    const TextDiff added = diff_text("", "x\ny\n", "/dev/null", "b/x.py");
    CHECK(added.unified == "--- /dev/null\n+++ b/x.py\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  }
  SECTION("a one-line side has no count; a missing final newline is marked") {
    const TextDiff d2 = diff_text("x\n", "x", "a", "b");
    CHECK(d2.unified == "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+x\n\\ No newline at end of file\n");
  }
  SECTION("changes 6 lines apart share a hunk; 7 apart do not") {
    std::string near = numbered_lines(1, 30), far = near;
    near.replace(near.find("line 10\n"), 8, "X\n");
    near.replace(near.find("line 17\n"), 8, "Y\n");  // 6 equal lines between
    const std::string one = diff_text(numbered_lines(1, 30), near, "a", "b").unified;
    CHECK(std::count(one.begin(), one.end(), '@') == 4);
    far.replace(far.find("line 10\n"), 8, "X\n");
    far.replace(far.find("line 18\n"), 8, "Y\n");  // 7 equal lines between
    const std::string two = diff_text(numbered_lines(1, 30), far, "a", "b").unified;
    CHECK(std::count(two.begin(), two.end(), '@') == 8);
    CHECK(two.find("@@ -7,7 +7,7 @@") != std::string::npos);
    CHECK(two.find("@@ -15,7 +15,7 @@") != std::string::npos);
  }
}

TEST_CASE("text diff: minimal, and the patch turns old into new (random texts)") {
  std::mt19937 rng(7);
  const char* alphabet[] = {"a\n", "b\n", "c\n", "def f():\n", "  return x\n", "\n"};
  for (int round = 0; round < 500; ++round) {
    auto text = [&](int n) {
      std::string s;
      for (int i = 0; i < n; ++i) s += alphabet[rng() % 6];
      if (!s.empty() && rng() % 5 == 0) s.pop_back();  // no final newline
      return s;
    };
    const std::string a = text(static_cast<int>(rng() % 25)), b = text(static_cast<int>(rng() % 25));
    INFO("old: " << a << "\nnew: " << b);
    const TextDiff d = diff_text(a, b, "a", "b");
    REQUIRE(d.computed);
    CHECK(d.lines_added + d.lines_removed == line_edit_distance(a, b));
    if (a != b) CHECK(apply_patch(a, d.unified) == b);
  }
}

TEST_CASE("text diff: bounded work, and cheap for a small change in a big file") {
  const std::string a = numbered_lines(1, 300'000);
  std::string b = a;
  b.replace(b.find("line 150000\n"), 12, "changed\n");
  const TextDiff small_change = diff_text(a, b, "a", "b");  // prefix and suffix trimmed away
  CHECK(small_change.computed);
  CHECK(small_change.lines_added == 1);

  const TextDiff everything = diff_text(numbered_lines(1, 3000), numbered_lines(5001, 8000), "a", "b");
  CHECK_FALSE(everything.computed);  // 6000 edits > max_edits
  CHECK(everything.old_lines == 3000);
  CHECK(everything.unified.empty());

  TextDiffLimits few_lines;
  few_lines.max_lines = 10;
  CHECK_FALSE(diff_text(numbered_lines(1, 20), numbered_lines(2, 21) + "x\n", "a", "b", few_lines).computed);
}

TEST_CASE("tensor values: 16- and 8-bit floats decode exactly") {
  CHECK(half_to_double(0x3C00) == 1.0);
  CHECK(half_to_double(0xC000) == -2.0);
  CHECK(half_to_double(0x7BFF) == 65504.0);
  CHECK(half_to_double(0x0001) == std::ldexp(1.0, -24));  // smallest subnormal
  CHECK(half_to_double(0x3555) == (1 + 0x155 / 1024.0) * 0.25);  // 0.333251953125
  CHECK(std::isinf(half_to_double(0x7C00)));
  CHECK(std::isnan(half_to_double(0x7E00)));
  CHECK(std::signbit(half_to_double(0x8000)));
  CHECK(bfloat16_to_double(0x3F80) == 1.0);
  CHECK(bfloat16_to_double(0xC049) == -3.140625);
  CHECK(std::isinf(bfloat16_to_double(0x7F80)));
  CHECK(float8_e4m3fn_to_double(0x38) == 1.0);
  CHECK(float8_e4m3fn_to_double(0x7E) == 448.0);
  CHECK(float8_e4m3fn_to_double(0x01) == std::ldexp(1.0, -9));
  CHECK(std::isnan(float8_e4m3fn_to_double(0x7F)));
  CHECK(float8_e5m2_to_double(0x3C) == 1.0);
  CHECK(float8_e5m2_to_double(0x7B) == 57344.0);
}

TEST_CASE("tensor values: elements are paired by index, whatever the strides") {
  // [[0, 1, 2], [3, 4, 5]] contiguous, and the same values in a column-major storage.
  const std::string row_major = bytes_of<float>({0, 1, 2, 3, 4, 5});
  const std::string col_major = bytes_of<float>({0, 3, 1, 4, 2, 5});
  const TensorInfo a = tensor("float32", {2, 3}, {3, 1});
  const TensorInfo b = tensor("float32", {2, 3}, {1, 2});
  TensorValueDiff same = compare(a, row_major, b, col_major);
  CHECK(same.compared);
  CHECK(same.elements == 6);
  CHECK(same.differing == 0);
  CHECK_FALSE(same.max_abs_diff);

  const std::string changed = bytes_of<float>({0, 3, 1, 4, 2, 5.5f});  // [1, 2]: 5 -> 5.5
  TensorValueDiff d = compare(a, row_major, b, changed);
  CHECK(d.differing == 1);
  CHECK(d.max_abs_diff == 0.5);
  CHECK(d.max_index == std::vector<int64_t>{1, 2});
  CHECK(d.old_value == 5.0);
  CHECK(d.new_value == 5.5);

  SECTION("storage offsets and views sharing a storage") {
    const std::string shared = bytes_of<double>({9, 9, 1, 2, 3, 9});
    const std::string other = bytes_of<double>({1, 2, 4});
    TensorValueDiff v = compare(tensor("float64", {3}, {1}, 2), shared, tensor("float64", {3}, {1}, 0), other);
    CHECK(v.differing == 1);
    CHECK(v.max_index == std::vector<int64_t>{2});
    CHECK(v.max_abs_diff == 1.0);
  }
  SECTION("half and bfloat16 storages") {
    const std::string h1 = bytes_of<uint16_t>({0x3C00, 0xC000}), h2 = bytes_of<uint16_t>({0x3C00, 0xBC00});
    TensorValueDiff h = compare(tensor("float16", {2}, {1}), h1, tensor("float16", {2}, {1}), h2);
    CHECK(h.max_abs_diff == 1.0);  // -2 -> -1
    TensorValueDiff bf = compare(tensor("bfloat16", {2}, {1}), bytes_of<uint16_t>({0x3F80, 0x4000}),
                                 tensor("bfloat16", {2}, {1}), bytes_of<uint16_t>({0x3F80, 0x4040}));
    CHECK(bf.max_abs_diff == 1.0);  // 2 -> 3
    CHECK(bf.differing == 1);
  }
  SECTION("integers differ exactly, bool by truth") {
    const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    TensorValueDiff i = compare(tensor("int64", {1}, {1}), bytes_of<int64_t>({lo}), tensor("int64", {1}, {1}),
                                bytes_of<int64_t>({hi}));
    CHECK(i.max_abs_diff == std::ldexp(1.0, 64));  // 2^64 - 1, rounded to double
    TensorValueDiff b8 = compare(tensor("bool", {3}, {1}), std::string("\x01\x00\x01", 3), tensor("bool", {3}, {1}),
                                 std::string("\x01\x01\x01", 3));
    CHECK(b8.differing == 1);
  }
  SECTION("NaN equals NaN; NaN against a number counts as non-finite") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    TensorValueDiff n = compare(tensor("float32", {3}, {1}), bytes_of<float>({nan, nan, 1}), tensor("float32", {3}, {1}),
                                bytes_of<float>({nan, 1, 1}));
    CHECK(n.differing == 1);
    CHECK(n.nonfinite == 1);
    CHECK_FALSE(n.max_abs_diff);
    CHECK(compare(tensor("float32", {1}, {1}), bytes_of<float>({0.0f}), tensor("float32", {1}, {1}),
                  bytes_of<float>({-0.0f}))
              .differing == 0);
  }
  SECTION("quantized: integer representations, no max") {
    TensorValueDiff q = compare(tensor("qint8", {2}, {1}), std::string("\x01\x02", 2), tensor("qint8", {2}, {1}),
                                std::string("\x01\x05", 2));
    CHECK(q.compared);
    CHECK(q.differing == 1);
    CHECK_FALSE(q.max_abs_diff);
    CHECK_THAT(q.note, Catch::Contains("quantized"));
  }
}

TEST_CASE("tensor values: hostile layouts are refused, not read") {
  const std::string four = bytes_of<float>({1, 2, 3, 4});
  TensorValueDiff past = compare(tensor("float32", {5}, {1}), four, tensor("float32", {5}, {1}), four);
  CHECK_FALSE(past.compared);
  CHECK_THAT(past.note, Catch::Contains("past its storage"));

  // A broadcast saved with stride 0 claiming 2^40 elements over one.
  TensorValueDiff broadcast =
      compare(tensor("float32", {1ll << 40}, {0}), four, tensor("float32", {1ll << 40}, {0}), four);
  CHECK_FALSE(broadcast.compared);
  CHECK_THAT(broadcast.note, Catch::Contains("too many repeats"));

  TensorValueDiff overflow = compare(tensor("float32", {2, 2}, {1ll << 62, 1}), four, tensor("float32", {2, 2}, {2, 1}), four);
  CHECK_FALSE(overflow.compared);
}

TEST_CASE("tensor values: storages stream through a window, out-of-order ones are held whole") {
  // 1000 x 700 float32 (2.8 MB): more than one window.
  const int64_t rows = 1000, cols = 700;
  std::vector<float> values(static_cast<size_t>(rows * cols)), transposed(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      values[static_cast<size_t>(r * cols + c)] = static_cast<float>(r * cols + c);
      transposed[static_cast<size_t>(c * rows + r)] = static_cast<float>(r * cols + c);
    }
  }
  transposed[static_cast<size_t>(5 * rows + 999)] += 0.25f;  // [999, 5]
  const auto a_source = make_memory_source(bytes_of(values)), b_source = make_memory_source(bytes_of(transposed));
  StorageBytes a(*a_source, 0, a_source->size()), b(*b_source, 0, b_source->size());
  const TensorValueDiff d = compare_tensor_values(tensor("float32", {rows, cols}, {cols, 1}), a,
                                                  tensor("float32", {rows, cols}, {1, rows}), b);
  REQUIRE(d.compared);
  CHECK(d.differing == 1);
  CHECK(d.max_index == std::vector<int64_t>{999, 5});
  CHECK(d.max_abs_diff == 0.25);
}

TEST_CASE("diff: an archive equals itself, and nothing is read that need not be") {
  const ArchiveDiff d = diff_files(testdata("mlp_scripted.pt"), testdata("mlp_scripted.pt"), {});
  CHECK(d.same());
  CHECK(d.records_compared == 30);
  CHECK(d.records_equal_by_crc == 0);
  CHECK(d.tensors.empty());
  CHECK(d.tensors_matched == 10);
  CHECK(d.tensors_unread == 10);
  CHECK(d.code.empty());
  CHECK(d.notes.empty());
}

TEST_CASE("diff: another top folder name is a note, not a change") {
  // The same archive with its folder renamed in every local and central header.
  std::string renamed = slurp(testdata("mlp_scripted.pt"));
  for (size_t at = renamed.find("mlp_scripted/"); at != std::string::npos; at = renamed.find("mlp_scripted/", at)) {
    renamed.replace(at, 13, "mlp_release2/");
  }
  const TorchArchive a(make_memory_source(slurp(testdata("mlp_scripted.pt")), "a.pt"));
  const TorchArchive b(make_memory_source(renamed, "b.pt"));
  REQUIRE(b.top_folder() == "mlp_release2");
  const ArchiveDiff d = diff_archives(a, b, {});
  CHECK(d.same());
  CHECK(d.tensors.empty());
  REQUIRE(d.notes.size() == 1);
  CHECK_THAT(d.notes[0], Catch::Contains("'mlp_scripted' and 'mlp_release2'") && Catch::Contains("not a change"));
}

TEST_CASE("diff: the second release of the MLP") {
  const ArchiveDiff d = diff_files(testdata("mlp_scripted.pt"), testdata("mlp_scripted_v2.pt"), {});
  CHECK_FALSE(d.same());
  REQUIRE(d.notes.size() == 1);
  CHECK_THAT(d.notes[0], Catch::Contains("top folders differ"));

  const TensorChange* weight = find_tensor(d, "head.weight");
  REQUIRE(weight != nullptr);
  CHECK(weight->values.compared);
  CHECK(weight->values.differing == 48);
  CHECK(*weight->values.max_abs_diff > 0.001);
  CHECK(*weight->values.max_abs_diff < 0.05);
  const TensorChange* bias = find_tensor(d, "head.bias");
  REQUIRE(bias != nullptr);
  CHECK(bias->values.differing == 1);
  CHECK(bias->values.max_index == std::vector<int64_t>{1});
  CHECK(*bias->values.max_abs_diff == Approx(0.25));
  const TensorChange* temperature = find_tensor(d, "temperature");
  REQUIRE(temperature != nullptr);
  CHECK(temperature->change == Change::Added);
  CHECK(d.tensors.size() == 3);
  CHECK(*d.max_abs_diff() == Approx(0.25));

  REQUIRE(d.code.size() == 1);
  CHECK(d.code[0].record == "code/__torch__/models.py");
  CHECK_THAT(d.code[0].diff.unified, Catch::Contains("+    return torch.clamp(_3, -10., 10.)\n") &&
                                         Catch::Contains("+  def predict(self: __torch__.models.MLP,\n"));
  CHECK(find_record(d, "code/__torch__/models.py.debug_pkl") != nullptr);  // listed, not diffed

  REQUIRE(d.extra.size() == 2);
  CHECK(d.extra[0].name == "labels.json");
  CHECK(d.extra[0].change == Change::Changed);
  CHECK(d.extra[1].name == "metrics.json");
  CHECK(d.extra[1].change == Change::Added);
  CHECK(find_record(d, "version") != nullptr);  // predict() uses div: format version 4
  // `temperature` took data/1, so the storages after it moved up by one.
  CHECK(find_record(d, "data/2")->same_as_old == "data/1");
  CHECK(find_record(d, "data/8")->same_as_old == "data/7");
  CHECK(find_record(d, "data/9")->same_as_old.empty());  // head.weight: changed

  DiffOptions records_only;
  records_only.tensors = records_only.code = false;
  const ArchiveDiff quick = diff_files(testdata("mlp_scripted.pt"), testdata("mlp_scripted_v2.pt"), records_only);
  CHECK(quick.records.size() == d.records.size());
  CHECK_FALSE(quick.tensors_compared);
  CHECK(quick.tensors.empty());
  CHECK(quick.code.empty());
}

TEST_CASE("diff: every dtype, a changed layout, and a storage shared by two views") {
  const ArchiveDiff d = diff_files(testdata("dtypes.pt"), testdata("dtypes_v2.pt"), {});
  CHECK(d.code.empty());  // same class, same code
  CHECK(find_tensor(d, "shared_a") == nullptr);  // its storage changed, not its elements
  CHECK(find_tensor(d, "b_i8") == nullptr);
  const TensorChange* shared_b = find_tensor(d, "shared_b");
  REQUIRE(shared_b != nullptr);
  CHECK(shared_b->values.max_abs_diff == 91.0);
  const TensorChange* t = find_tensor(d, "transposed");
  REQUIRE(t != nullptr);
  CHECK(t->layout_changed);
  CHECK(t->values.differing == 1);
  CHECK(t->values.max_index == std::vector<int64_t>{3, 0});
  CHECK(find_tensor(d, "w_f16")->values.differing == 2);
  CHECK(*find_tensor(d, "w_bf16")->values.max_abs_diff == Approx(3.0 - 0.181640625));
  CHECK(find_tensor(d, "b_u8")->values.max_abs_diff == 250.0);
  CHECK(find_tensor(d, "b_bool")->values.differing == 1);
  CHECK(find_tensor(d, "scalar")->values.max_abs_diff == 0.5);
}

TEST_CASE("diff: equal size and CRC-32 is not taken for equal bytes; other bytes are damage, not a change") {
  // A stored tensor record with one byte changed and its CRC left as it was:
  // the central directory says "same", the bytes do not, and the new record
  // does not match its CRC-32: the new archive is damaged.
  const std::string original = slurp(testdata("mlp_scripted.pt"));
  const TorchArchive archive(make_memory_source(original));
  const Record* record = archive.find("data/0");
  REQUIRE(record != nullptr);
  std::string forged = original;
  forged[record->entry->data_offset] ^= 0x40;
  const TorchArchive a(make_memory_source(original, "old.pt")), b(make_memory_source(forged, "new.pt"));

  for (const auto& [older, newer] : {std::make_pair(&a, &b), std::make_pair(&b, &a)}) {
    try {
      diff_archives(*older, *newer, {});
      FAIL("a damaged record was taken for a change");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadInput);
      CHECK(e.file() == "new.pt");
      CHECK(std::string(e.what()).find("damaged: record 'data/0' does not match its CRC-32") != std::string::npos);
    }
  }

  DiffOptions trusting;
  trusting.byte_compare_limit = 0;
  const ArchiveDiff by_crc = diff_archives(a, b, trusting);
  CHECK(by_crc.same());
  CHECK(by_crc.records_equal_by_crc == by_crc.records_compared);
}

TEST_CASE("diff: what the pickle reader had to skip is a note, not a silent removal") {
  // data.pkl naming an unknown storage class for every float32 tensor, with
  // its CRC-32 fixed so that the archive reads.
  const std::string original = slurp(testdata("dtypes.pt"));
  std::string forged = original;
  const TorchArchive archive(make_memory_source(original));
  const ZipEntry& pkl = *archive.find("data.pkl")->entry;
  REQUIRE(pkl.stored());
  const size_t at = forged.find("torch\nFloatStorage\n", pkl.data_offset);
  REQUIRE(at < pkl.data_offset + pkl.uncompressed_size);
  forged.replace(at, 19, "torch\nFloatStorag3\n");
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(forged.data() + pkl.data_offset), static_cast<uInt>(pkl.uncompressed_size)));
  for (int i = 0; i < 4; ++i) forged[pkl.central_offset + 16 + i] = static_cast<char>(crc >> (8 * i));

  const TorchArchive a(make_memory_source(original, "a.pt")), b(make_memory_source(forged, "b.pt"));
  const ArchiveDiff d = diff_archives(a, b, {});
  REQUIRE(find_record(d, "data.pkl") != nullptr);
  REQUIRE(find_tensor(d, "w_f32") != nullptr);
  CHECK(find_tensor(d, "w_f32")->change == Change::Removed);
  REQUIRE_FALSE(d.notes.empty());
  CHECK_THAT(d.notes[0], Catch::StartsWith("the new archive: tensor '") && Catch::Contains("unknown storage type 'FloatStorag3'"));
  CHECK(d.notes.size() <= 6);  // five problems and a count of the rest
}

TEST_CASE("diff: files that are not TorchScript archives are refused") {
  try {
    diff_files(testdata("mlp_scripted.pt"), testdata("state_dict.pth"), {});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK_THAT(e.what(), Catch::StartsWith("cannot diff this file: it is a torch.save file"));
    CHECK_THAT(e.file(), Catch::EndsWith("state_dict.pth"));
  }
  CHECK_THROWS_AS(diff_files(testdata("hostile/truncated.pt"), testdata("mlp_scripted.pt"), {}), Error);
  try {
    diff_files(testdata("mlp_scripted.pt"), testdata("no-such.pt"), {});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
  }
}
