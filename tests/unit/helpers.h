#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "base/error.h"
#include "cli/cli.h"
#include "contract/host_value.h"
#include "contract/serve.h"
#include "format/archive.h"
#include "format/byte_source.h"
#include "format/zip_writer.h"

inline std::string testdata(const std::string& name) { return std::string(TSARCHIVE_TESTDATA_DIR) + "/" + name; }

// Runs `f`, which must throw a tsarchive::Error; returns it.
template <typename F>
tsarchive::Error error_of(F&& f) {
  try {
    f();
  } catch (const tsarchive::Error& e) {
    return e;
  }
  FAIL("no tsarchive::Error was thrown");
  throw;  // unreachable
}

// Runs `f`, which must throw tsarchive::Error of `kind` whose message contains `text`; returns it.
template <typename F>
tsarchive::Error error_of(F&& f, tsarchive::ErrorKind kind, const std::string& text) {
  try {
    f();
  } catch (const tsarchive::Error& e) {
    INFO(e.what() << " | hint: " << e.hint());
    CHECK(e.kind() == kind);
    CHECK_THAT(e.what(), Catch::Contains(text));
    return e;
  }
  FAIL("no error; expected one containing: " << text);
  throw;  // unreachable
}

// A contiguous float32 tensor of `shape` holding `values`.
inline tsarchive::HostTensor float_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  tsarchive::HostTensor t;
  t.dtype = "float32";
  t.shape = std::move(shape);
  t.stride = tsarchive::contiguous_strides(t.shape);
  t.bytes = std::make_shared<const std::string>(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return t;
}

// Bytes written as numbers and characters: a pickle or a header by hand.
inline std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s += static_cast<char>(c);
  return s;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A folder of its own under /tmp, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/tsarchive-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
  // testdata/`name` copied to <dir>/model.pt, for a test that changes it.
  std::string copy(const std::string& name) const {
    const std::string to = file("model.pt");
    std::filesystem::copy_file(testdata(name), to, std::filesystem::copy_options::overwrite_existing);
    return to;
  }
};

// The CLI driven in-process: argv (without the program name) in, exit code
// and both streams out.
struct CliResult {
  int code;
  std::string out;
  std::string err;
};

inline CliResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "tsarchive");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = tsarchive::cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

// The bytes of the archive at `path` with record `name` (below its top folder)
// holding `bytes` instead, every other record kept but those whose names
// start with `drop` ("data/"): damage, or a changed model.
inline std::string archive_with_record(const std::string& path, const std::string& name, const std::string& bytes,
                                      const std::string& drop = {}) {
  using namespace tsarchive;
  const TorchArchive archive(open_file_source(path));
  std::vector<ZipEntrySpec> entries;
  for (const Record& r : archive.records()) {
    if (!drop.empty() && r.name.rfind(drop, 0) == 0) continue;
    entries.push_back(r.name == name ? ZipEntrySpec::create(archive.top_folder() + "/" + r.name, bytes)
                                     : ZipEntrySpec::keep(*r.entry));
  }
  const ByteSource& source = archive.zip().source();
  const ZipRewritePlan plan = plan_zip_rewrite(source, archive.zip().layout(), entries);
  return render_plan(plan, 0, [&](uint64_t at, char* out, size_t n) { source.read_at(at, out, n); });
}
