// The tar reader (format/tar.h) on tars built here header by header: it must
// list the members Python's tarfile lists (CPython 3.11's rules), since
// torch.load unpickles the members tarfile finds.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <utility>

#include "format/byte_source.h"
#include "format/tar.h"

using namespace tsarchive;

namespace {

struct Header {
  Header(std::string n, uint64_t s = 0, char t = '0', std::string p = {}, std::string l = {}, std::string f = {})
      : name(std::move(n)), size(s), type(t), prefix(std::move(p)), linkname(std::move(l)), size_field(std::move(f)) {}
  std::string name;
  uint64_t size = 0;
  char type = '0';
  std::string prefix;
  std::string linkname;
  std::string size_field;  // the size as spelled, when not the usual octal
  bool ustar = true;
};

void put(std::string& block, size_t at, const std::string& text) { block.replace(at, text.size(), text); }

std::string octal(uint64_t v, size_t digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(digits), static_cast<unsigned long long>(v));
  return buf;
}

std::string header(const Header& h) {
  std::string b(512, '\0');
  put(b, 0, h.name);
  put(b, 100, "0000644");
  put(b, 108, "0001750");
  put(b, 116, "0001750");
  put(b, 124, h.size_field.empty() ? octal(h.size, 11) : h.size_field);
  put(b, 136, "14705323200");
  b[156] = h.type;
  put(b, 157, h.linkname);
  if (h.ustar) put(b, 257, std::string("ustar\0" "00", 8));
  put(b, 345, h.prefix);
  put(b, 148, "        ");
  unsigned sum = 0;
  for (unsigned char c : b) sum += c;
  put(b, 148, octal(sum, 6) + std::string("\0 ", 2));
  return b;
}

std::string padded(const std::string& data) { return data + std::string((512 - data.size() % 512) % 512, '\0'); }

std::string member(const Header& h, const std::string& data) {
  Header with = h;
  with.size = data.size();
  return header(with) + padded(data);
}

const std::string kEnd(1024, '\0');

TarListing list(const std::string& bytes) {
  const auto source = make_memory_source(bytes);
  const std::optional<TarListing> tar = list_tar(*source);
  REQUIRE(tar);
  return *tar;
}

std::vector<std::string> names(const TarListing& t) {
  std::vector<std::string> out;
  for (const TarMember& m : t.members) out.push_back(m.name);
  return out;
}

}  // namespace

TEST_CASE("tar: a header is what tarfile's checksum and numbers accept") {
  const std::string h = header({"pickle", 3});
  CHECK(is_tar_header(reinterpret_cast<const unsigned char*>(h.data())));
  std::string bad = h;
  bad[0] = 'P';  // the checksum no longer matches
  CHECK_FALSE(is_tar_header(reinterpret_cast<const unsigned char*>(bad.data())));
  const std::string zeros(512, '\0');
  CHECK_FALSE(is_tar_header(reinterpret_cast<const unsigned char*>(zeros.data())));
  // int(" 0o3", 8) reads: tarfile takes it, and the reader says it is unusual.
  const std::string odd = header({"pickle", 0, '0', "", "", " 0o3"});
  CHECK(is_tar_header(reinterpret_cast<const unsigned char*>(odd.data())));
  const TarListing t = list(odd + padded("abc") + kEnd);
  REQUIRE(t.members.size() == 1);
  CHECK(t.members[0].size == 3);
  CHECK_FALSE(t.anomalies.empty());
  // A number that int(..., 8) refuses makes the header invalid.
  const std::string nine = header({"pickle", 0, '0', "", "", "00000000009"});
  CHECK_FALSE(is_tar_header(reinterpret_cast<const unsigned char*>(nine.data())));
  // A file that does not start with a header is not a tar.
  CHECK_FALSE(list_tar(*make_memory_source(std::string(600, 'x'))));
}

TEST_CASE("tar: names as tarfile makes them: prefix, directories, V7 headers") {
  Header v7{"pickle", 0, '0'};
  v7.ustar = false;
  const TarListing t = list(member({"storages"}, "12345") + member({"x", 0, '0', "dir"}, "") +
                            member({"d/", 0, '\0'}, "") + member(v7, "p") + kEnd);
  CHECK(names(t) == std::vector<std::string>{"storages", "dir/x", "d", "pickle"});
  CHECK(t.members[2].type == '5');
  CHECK(t.members[0].size == 5);
  CHECK(t.members[0].data_offset == 512);
  CHECK(t.members[3].data_offset == 2560);
  CHECK(t.anomalies.empty());
  CHECK(t.read_error.empty());
}

TEST_CASE("tar: GNU long names and PAX records rename members, the outer header winning") {
  const std::string longname = member({"././@LongLink", 0, 'L'}, std::string("pickle\0", 7));
  const std::string outer = member({"././@LongLink", 0, 'L'}, std::string("tensors\0", 8));
  TarListing t = list(outer + longname + member({"notes.txt"}, "data") + kEnd);
  CHECK(names(t) == std::vector<std::string>{"tensors"});
  CHECK_FALSE(t.anomalies.empty());

  t = list(member({"././@PaxHeader", 0, 'x'}, "15 path=pickle\n") + member({"notes.txt"}, "data") + kEnd);
  CHECK(names(t) == std::vector<std::string>{"pickle"});

  // A global header renames every member after it.
  t = list(member({"g", 0, 'g'}, "15 path=pickle\n") + member({"a"}, "1") + member({"b"}, "2") + kEnd);
  CHECK(names(t) == std::vector<std::string>{"pickle", "pickle"});

  // A PAX size moves where the next header is read.
  const std::string data = padded("0123456789") + member({"pickle"}, "x");
  t = list(member({"././@PaxHeader", 0, 'x'}, "11 size=10\n") + header({"storages", 0}) + data + kEnd);
  CHECK(names(t) == std::vector<std::string>{"storages", "pickle"});
  CHECK(t.members[0].size == 10);
}

TEST_CASE("tar: what ends the list, and what tarfile raises on") {
  // Data that runs past the end: ReadError when the next member is asked for.
  const std::string cut = header({"storages", 4096}) + std::string(100, 'x');
  TarListing t = list(cut);
  CHECK(names(t) == std::vector<std::string>{"storages"});
  CHECK_FALSE(t.read_error.empty());
  // An extended header followed by nothing valid.
  t = list(member({"storages"}, "1") + member({"p", 0, 'x'}, "15 path=pickle\n") + std::string(512, '\x01'));
  CHECK_FALSE(t.read_error.empty());
  // A member after the end blocks is hidden from tarfile, and said.
  t = list(member({"storages"}, "1") + std::string(512, '\0') + member({"pickle"}, "evil") + kEnd);
  CHECK(names(t) == std::vector<std::string>{"storages"});
  CHECK_FALSE(t.anomalies.empty());
  // Zeros to the end, as tarfile pads: nothing to say.
  t = list(member({"storages"}, "1") + std::string(10240 - 1024, '\0'));
  CHECK(t.anomalies.empty());
  // A type tarfile does not know is read as a file; a directory's size is not skipped.
  t = list(member({"pickle", 0, 'Z'}, "data") + kEnd);
  REQUIRE(t.members.size() == 1);
  CHECK(t.members[0].read_as_file());
  CHECK_FALSE(t.anomalies.empty());
  const std::string inner = member({"pickle"}, "evil");
  t = list(header({"d", inner.size(), '5'}) + inner + kEnd);
  CHECK(names(t) == std::vector<std::string>{"d", "pickle"});
}

TEST_CASE("tar: the member count is bounded") {
  std::string many;
  for (int i = 0; i < 50; ++i) many += member({"m" + std::to_string(i)}, "");
  const auto source = make_memory_source(many + kEnd);
  const std::optional<TarListing> t = list_tar(*source, 10);
  REQUIRE(t);
  CHECK(t->members.size() == 10);
  CHECK_FALSE(t->anomalies.empty());
}
