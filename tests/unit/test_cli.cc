// The CLI driven in-process: argv in, exit code and both streams out.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "helpers.h"

TEST_CASE("cli: inspect --json is one document with a schema") {
  const CliResult r = run_cli({"inspect", "--json", testdata("mlp_scripted.pt")});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["schema"] == "tsarchive.inspect/2");
  CHECK(doc["file"] == testdata("mlp_scripted.pt"));
  CHECK(doc["kind"] == "torchscript");
  CHECK(doc["archive"]["top_folder"] == "mlp_scripted");
  CHECK(doc["parameter_count"] == 227);
}

TEST_CASE("cli: errors are one line with the documented exit code") {
  const CliResult missing = run_cli({"inspect", testdata("nope.pt")});
  CHECK(missing.code == 4);
  CHECK(missing.out.empty());
  CHECK_THAT(missing.err, Catch::StartsWith("tsarchive: error: no such file (") && Catch::EndsWith("): check the path\n"));

  const CliResult bad = run_cli({"inspect", testdata("hostile/random.bin")});
  CHECK(bad.code == 3);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);

  CHECK(run_cli({"inspect"}).code == 2);
  CHECK(run_cli({"inspect", "--frob", testdata("mlp_scripted.pt")}).code == 2);
  CHECK(run_cli({"no-such-command"}).code == 2);
}

TEST_CASE("cli: no command prints usage and exits 2; --help exits 0") {
  const CliResult none = run_cli({});
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Catch::Contains("inspect"));
  const CliResult help = run_cli({"--help"});
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("inspect") && Catch::Contains("Exit codes"));
}

TEST_CASE("cli: --extra pretty-prints JSON extra files") {
  const CliResult r = run_cli({"inspect", testdata("mlp_scripted.pt"), "--extra", "labels.json"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "{\n  \"classes\": [\n    \"cat\",\n    \"dog\",\n    \"bird\"\n  ]\n}\n");
}

TEST_CASE("cli: diff exits 0 for the same archive, 1 for different ones; -q prints nothing") {
  const std::string v1 = testdata("mlp_scripted.pt"), v2 = testdata("mlp_scripted_v2.pt");
  const CliResult same = run_cli({"diff", v1, v1});
  CHECK(same.code == 0);
  CHECK_THAT(same.out, Catch::Contains(": same\n"));
  CHECK(same.err.empty());
  const CliResult different = run_cli({"diff", v1, v2});
  CHECK(different.code == 1);
  CHECK_THAT(different.out, Catch::Contains(": different\n") && Catch::Contains("max abs diff 0.25"));
  const CliResult quiet = run_cli({"diff", "-q", v1, v2});
  CHECK(quiet.code == 1);
  CHECK(quiet.out.empty());
  CHECK(quiet.err.empty());
  CHECK(run_cli({"diff", "--quiet", v1, v1}).code == 0);
}

TEST_CASE("cli: diff --json is one document; bad input is one line with exit 3 or 4") {
  const CliResult r = run_cli({"diff", "--json", testdata("mlp_scripted.pt"), testdata("mlp_scripted_v2.pt")});
  REQUIRE(r.code == 1);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["schema"] == "tsarchive.diff/2");
  CHECK(doc["same"] == false);
  CHECK(doc["summary"]["tensors_changed"] == 2);
  CHECK(doc["summary"]["max_abs_diff"] == 0.25);

  const CliResult torch_save = run_cli({"diff", testdata("state_dict.pth"), testdata("mlp_scripted.pt")});
  CHECK(torch_save.code == 3);
  CHECK(torch_save.out.empty());
  CHECK(std::count(torch_save.err.begin(), torch_save.err.end(), '\n') == 1);
  CHECK_THAT(torch_save.err, Catch::StartsWith("tsarchive: error: cannot diff this file: it is a torch.save file"));
  CHECK(run_cli({"diff", testdata("mlp_scripted.pt"), testdata("nope.pt")}).code == 4);
  CHECK(run_cli({"diff", testdata("mlp_scripted.pt")}).code == 2);
  CHECK(run_cli({"diff", "-q", "--json", testdata("mlp_scripted.pt"), testdata("mlp_scripted.pt")}).code == 2);
}

namespace {
// `verify` (and so the gate before libtorch) refuses a hostile file with exit
// 3 and one error line that names the problem.
void refused(const std::string& hostile_file, const std::string& problem) {
  INFO(hostile_file);
  const CliResult r = run_cli({"verify", testdata("hostile/" + hostile_file)});
  CHECK(r.code == 3);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(problem));
  const CliResult ran = run_cli({"run", testdata("hostile/" + hostile_file), "--input", "1x8"});
  CHECK(ran.code == 3);
  CHECK_THAT(ran.err, Catch::Contains(problem));
}
}  // namespace

TEST_CASE("cli: the gate refuses renamed __parameters__/__buffers__ lists (libtorch 1.13 SEGFAULTs)") {
  refused("renamed_parameters.pt", "assigns '__paramXters__', which TorchScript never writes");
  refused("renamed_buffers.pt", "assigns '__bufferX__', which TorchScript never writes");
}

TEST_CASE("cli: archives in PyTorch 1.0-1.5 conventions are not damaged (format 1 and 2, no lists)") {
  for (const char* name : {"versions/v1_mlp.pt", "versions/v2_mlp.pt"}) {
    INFO(name);
    const CliResult r = run_cli({"verify", testdata(name)});
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains(": intact"));
    const CliResult i = run_cli({"inspect", testdata(name)});
    CHECK(i.code == 0);
    CHECK_THAT(i.out, Catch::Contains("as PyTorch 1.5 and older wrote them"));
  }
}

TEST_CASE("cli: versions newer than this libtorch reads are not called damaged") {
  for (const char* name : {"versions/format11_mlp.pt", "versions/bytecode10_mlp.ptl"}) {
    INFO(name);
    const CliResult r = run_cli({"verify", testdata(name)});
    CHECK(r.code == 3);
    CHECK_THAT(r.out, Catch::Contains("intact, but not readable by this libtorch"));
    CHECK_THAT(r.err, Catch::StartsWith("tsarchive: error: written by a newer PyTorch: "));
    CHECK_THAT(r.err + r.out, !Catch::Contains("DAMAGED") && !Catch::Contains("damaged"));
    const CliResult ran = run_cli({"run", testdata(name), "--input", "2x8"});
    CHECK(ran.code == 3);
    CHECK_THAT(ran.err, Catch::StartsWith("tsarchive: error: written by a newer PyTorch: ") && !Catch::Contains("damaged"));
  }
  const CliResult r = run_cli({"verify", testdata("versions/format11_mlp.pt")});
  CHECK_THAT(r.err, Catch::Contains("format version 11 is newer than libtorch "));
}

TEST_CASE("cli: the gate refuses overlapping entries and names that could leave a folder") {
  refused("overlapping_entries.pt", "'mlp_scripted/extra/host.bin' and 'mlp_scripted/extra/inner.txt' overlap");
  refused("traversal_extra.pt", "has a '..' part");
  refused("traversal_top.pt", "has a '..' part");
  refused("absolute_names.pt", "has an absolute name");
  refused("absolute_extra.pt", "has an empty part");
  refused("backslash_names.pt", "has a backslash in its name");
}

TEST_CASE("cli: the gate refuses disagreeing version records and a missing constants.pkl") {
  refused("version_disagree_in_range.pt", "the version records disagree: 'version' says 3, '.data/version' says 6");
  refused("missing_constants_pkl.pt", "constants.pkl is missing");
}

TEST_CASE("cli: the unedited rebuild of the hostile corpus verifies") {
  CHECK(run_cli({"verify", testdata("hostile/ok_rebuilt.pt")}).code == 0);
}

// The one catch: an Error keeps its exit code, anything else is an internal
// error (exit 6), one escaped line each; --verbose adds an Error's detail.
TEST_CASE("report_current_exception maps every exception to one line and its exit code", "[cli]") {
  using tsarchive::Error;
  using tsarchive::ErrorKind;
  const auto report = [](auto thrown, bool verbose) {
    std::ostringstream err;
    int code = -1;
    try {
      throw thrown;
    } catch (...) {
      code = tsarchive::cli::report_current_exception(err, verbose);
    }
    return std::make_pair(code, err.str());
  };
  const Error torch = Error(ErrorKind::Torch, "libtorch failed", "m.pt", "try again").with_detail("full\ntext");
  CHECK(report(torch, false) == std::make_pair(5, std::string("tsarchive: error: libtorch failed (m.pt): try again\n")));
  CHECK(report(torch, true).second == "full\ntext\ntsarchive: error: libtorch failed (m.pt): try again\n");
  // The detail quotes the model (its exception's text): escaped, lines kept.
  const Error hostile = Error(ErrorKind::Torch, "libtorch failed", "m.pt")
                            .with_detail("Exception: \x1b]0;owned\x07\x1b[2J\rok\n\u202eevil\ttab");
  CHECK(report(hostile, true).second ==
        "Exception: \\x1b]0;owned\\x07\\x1b[2J\\rok\n\\u202eevil\ttab\ntsarchive: error: libtorch failed (m.pt)\n");
  const auto [alloc_code, alloc_line] = report(std::bad_alloc(), false);
  CHECK(alloc_code == 6);
  CHECK(alloc_line.rfind("tsarchive: error: out of memory: ", 0) == 0);
  const auto [logic_code, logic_line] = report(std::logic_error("broken\x1b[2J invariant"), false);
  CHECK(logic_code == 6);
  CHECK(logic_line.rfind("tsarchive: error: internal error: broken\\x1b[2J invariant: please report", 0) == 0);
  CHECK(report(42, false).first == 6);
}

namespace {
// Sets an environment variable for one scope and restores what was there.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const std::string& n, const std::string& value) : name(n) {
    if (const char* v = ::getenv(n.c_str())) old = v;
    ::setenv(n.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
};
}  // namespace

TEST_CASE("cli: --version names the build without loading libtorch; --verbose loads it") {
  // A torch layer that cannot exist: --version must not notice, since it
  // never looks for one; --version --verbose must say it is unavailable.
  const ScopedEnv env("TSARCHIVE_TORCH_LIBRARY", "/nonexistent/libtsarchive_torch.so");
  const CliResult fast = run_cli({"--version"});
  CHECK(fast.code == 0);
  CHECK(fast.err.empty());
  CHECK_THAT(fast.out, Catch::StartsWith("tsarchive 0.") && Catch::Contains(" (commit "));
  CHECK_THAT(fast.out, Catch::Contains("\nlibtorch ") && Catch::Contains("\ncuda "));
  CHECK_THAT(fast.out, !Catch::Contains("unavailable") && !Catch::Contains("torch layer"));

  const CliResult verbose = run_cli({"--version", "--verbose"});
  CHECK(verbose.code == 0);
  CHECK_THAT(verbose.out, Catch::StartsWith(fast.out));
  CHECK_THAT(verbose.out, Catch::Contains("torch layer  not found (TSARCHIVE_TORCH_LIBRARY /nonexistent/libtsarchive_torch.so)"));
  CHECK_THAT(verbose.out, Catch::Contains("libtorch unavailable: the libtorch layer named by TSARCHIVE_TORCH_LIBRARY "
                                          "does not exist"));

  const CliResult alone = run_cli({"--verbose"});
  CHECK(alone.code == 2);
  CHECK_THAT(alone.err, Catch::Contains("--verbose requires --version"));
}

// With --json, an error is also a JSON object (tsarchive.error/1) on stdout.
TEST_CASE("report_current_exception writes a tsarchive.error/1 object when asked", "[cli]") {
  std::ostringstream err, out;
  int code = -1;
  try {
    throw tsarchive::Error(tsarchive::ErrorKind::BadInput, "the archive is damaged", "m.pt", "fetch it again");
  } catch (...) {
    code = tsarchive::cli::report_current_exception(err, false, &out);
  }
  CHECK(code == 3);
  CHECK(err.str() == "tsarchive: error: the archive is damaged (m.pt): fetch it again\n");
  const auto doc = nlohmann::json::parse(out.str());
  CHECK(doc == nlohmann::json{{"schema", "tsarchive.error/1"}, {"kind", "bad_input"}, {"file", "m.pt"},
                              {"message", "the archive is damaged"}, {"hint", "fetch it again"}, {"exit_code", 3}});
  std::ostringstream line;
  try {
    throw std::bad_alloc();
  } catch (...) {
    tsarchive::cli::report_current_exception(err, false, &line, -1);
  }
  const std::string one_line = line.str();
  CHECK(std::count(one_line.begin(), one_line.end(), '\n') == 1);
  CHECK(nlohmann::json::parse(one_line)["kind"] == "internal");
}

TEST_CASE("cli: with --json a failing command leaves an error object on stdout") {
  const CliResult r = run_cli({"verify", "--json", testdata("nope.pt")});
  CHECK(r.code == 4);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["schema"] == "tsarchive.error/1");
  CHECK(doc["kind"] == "io");
  CHECK(doc["exit_code"] == 4);
  CHECK(run_cli({"verify", testdata("nope.pt")}).out.empty());
}

// -o - writes the edited archive to stdout (the report goes to stderr): the
// same bytes as -o FILE.
TEST_CASE("cli: extra set -o - writes the archive to stdout") {
  TempDir dir;
  const CliResult streamed = run_cli({"extra", "set", testdata("mlp_scripted.pt"), "owner=ml", "-o", "-"});
  REQUIRE(streamed.code == 0);
  CHECK_THAT(streamed.err, Catch::Contains("wrote -:"));
  const CliResult file = run_cli({"extra", "set", testdata("mlp_scripted.pt"), "owner=ml", "-o", dir.file("out.pt")});
  REQUIRE(file.code == 0);
  CHECK(streamed.out == slurp(dir.file("out.pt")));
  CHECK(run_cli({"extra", "get", dir.file("out.pt"), "owner"}).out == "ml");
}

// Several archives: one report each, a summary, the worst exit status.
TEST_CASE("cli: verify of several files reports each and exits with the worst status") {
  const CliResult r = run_cli({"verify", "--json", testdata("mlp_scripted.pt"), testdata("hostile/random.bin")});
  CHECK(r.code == 3);
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> docs;
  for (std::string line; std::getline(lines, line);) docs.push_back(nlohmann::json::parse(line));
  REQUIRE(docs.size() == 3);
  CHECK(docs[0]["schema"] == "tsarchive.verify/1");
  CHECK(docs[1]["schema"] == "tsarchive.error/1");
  CHECK(docs[1]["exit_code"] == 3);
  CHECK(docs[2]["schema"] == "tsarchive.summary/1");
  CHECK(docs[2]["files"] == 2);
  CHECK(docs[2]["ok"] == 1);
  CHECK(docs[2]["exit_code"] == 3);
}

TEST_CASE("cli: -q prints nothing on stdout; the exit status and stderr stay") {
  const CliResult ok = run_cli({"verify", "-q", testdata("mlp_scripted.pt")});
  CHECK(ok.code == 0);
  CHECK(ok.out.empty());
  const CliResult listed = run_cli({"extra", "list", "--quiet", "--json", testdata("mlp_scripted.pt")});
  CHECK(listed.code == 0);
  CHECK(listed.out.empty());
  const CliResult missing = run_cli({"inspect", "-q", "--json", testdata("nope.pt")});
  CHECK(missing.code == 4);
  CHECK(missing.out.empty());
  CHECK_THAT(missing.err, Catch::StartsWith("tsarchive: error: no such file"));
}

TEST_CASE("cli: --color always and never as they say; auto only on a terminal without NO_COLOR", "[cli]") {
  using tsarchive::cli::choose_color;
  CHECK(choose_color("always", -1));
  CHECK_FALSE(choose_color("never", -1));
  CHECK_FALSE(choose_color("auto", -1));  // not a terminal
  const CliResult painted = run_cli({"inspect", "--color=always", testdata("nope.pt")});
  CHECK_THAT(painted.err, Catch::StartsWith("\033[1;31mtsarchive: error:\033[0m no such file"));
  // The next command without --color is plain again.
  CHECK_THAT(run_cli({"inspect", testdata("nope.pt")}).err, Catch::StartsWith("tsarchive: error: no such file"));
}

TEST_CASE("cli: stamp --keep-bytes --in-place rewrites only the end of the archive, and stamps it again") {
  TempDir dir;
  const std::string a = dir.file("a.pt");
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), a);
  const std::string before = slurp(a);
  CHECK(run_cli({"stamp", "--keep-bytes", "--in-place", "--no-host", "--no-git", a}).code == 0);
  const std::string once = slurp(a);
  CHECK(run_cli({"verify", "--require-stamp", a}).code == 0);
  // The records stay where they were: only what follows them (the new stamp,
  // the directory) is written.
  const size_t directory = before.find(std::string("PK\x01\x02", 4));
  REQUIRE(directory != std::string::npos);
  CHECK(once.size() > before.size());
  CHECK(once.compare(0, directory, before, 0, directory) == 0);
  // A second stamp replaces the first, which is now the last record.
  CHECK(run_cli({"stamp", "--keep-bytes", "--in-place", "--no-host", "--no-git", "--field", "run=2", a}).code == 0);
  CHECK(run_cli({"verify", "--require-stamp", a}).code == 0);
  CHECK(slurp(a).compare(0, 1000, once, 0, 1000) == 0);
  // It needs --keep-bytes (a re-save writes a whole new file) and excludes -o.
  CHECK(run_cli({"stamp", "--in-place", a}).code == 2);
  CHECK(run_cli({"stamp", "--keep-bytes", "--in-place", a, "-o", dir.file("b.pt")}).code == 2);
}

TEST_CASE("cli: stamp --keep-bytes of several archives stamps each; -o takes one") {
  TempDir dir;
  const std::string a = dir.file("a.pt"), b = dir.file("b.ptl");
  std::filesystem::copy_file(testdata("mlp_scripted.pt"), a);
  std::filesystem::copy_file(testdata("mlp.ptl"), b);
  const CliResult r = run_cli({"stamp", "--keep-bytes", "--no-host", "--no-git", a, b});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("stamped " + a) && Catch::Contains("stamped " + b) &&
                        Catch::EndsWith("2 files: 2 ok\n"));
  CHECK(run_cli({"verify", "--require-stamp", a, b}).code == 0);
  CHECK(run_cli({"stamp", "--keep-bytes", a, b, "-o", dir.file("c.pt")}).code == 2);
}

TEST_CASE("cli: a pipe without a writer is refused at once, not waited on") {
  TempDir dir;
  const std::string fifo = dir.file("model.pt");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"inspect", fifo}, {"verify", fifo}, {"extra", "list", fifo},
        {"verify", "--key", fifo, testdata("mlp_scripted.pt")}}) {
    const CliResult r = run_cli(args);
    INFO(args[0] << " " << args[1] << ": " << r.err);
    CHECK(r.code == 4);
    CHECK_THAT(r.err, Catch::Contains("not a regular file"));
  }
}

TEST_CASE("cli: standard input named twice is a usage error") {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"inspect", "-", "-"},
                                               {"verify", "--json", "-", "-"},
                                               {"diff", "-", "-"}}) {
    const CliResult r = run_cli(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("standard input ('-') is named more than once"));
  }
}

TEST_CASE("cli: verify --key reads the key even when the model carries no signature") {
  const std::string model = testdata("mlp_scripted.pt");
  const CliResult missing = run_cli({"verify", "--key", testdata("no-such-key.pub"), model});
  CHECK(missing.code == 4);
  CHECK_THAT(missing.err, Catch::Contains("cannot open the public key"));
  const CliResult not_a_key = run_cli({"verify", "--key", model, model});
  CHECK(not_a_key.code != 0);
  CHECK_THAT(not_a_key.err, Catch::Contains("not a PEM public key"));
}

TEST_CASE("cli: other tools' names and options before the command point at the right place") {
  const CliResult ls = run_cli({"ls", testdata("mlp_scripted.pt")});
  CHECK(ls.code == 2);
  CHECK_THAT(ls.err, Catch::Contains("did you mean 'tsarchive extra list'?"));
  const CliResult early = run_cli({"-q", "inspect", testdata("mlp_scripted.pt")});
  CHECK(early.code == 2);
  CHECK_THAT(early.err, Catch::Contains("'-q' is an option of 'tsarchive inspect': it goes after the command"));
  // --help-all expands extra's own commands, options included.
  const CliResult all = run_cli({"--help-all"});
  CHECK(all.code == 0);
  for (const char* option : {"--prune", "--missing-ok", "--in-place", "--allow-damaged"}) {
    CHECK_THAT(all.out, Catch::Contains(option));
  }
}

TEST_CASE("cli: an edit's note names how verify will report it, and none when the stamp still covers") {
  TempDir dir;
  const std::string model = dir.copy("mlp_scripted.pt");
  REQUIRE(run_cli({"stamp", "-q", "--keep-bytes", "--no-git", "--no-host", model}).code == 0);
  const CliResult added = run_cli({"extra", "set", "-q", model, "foo=bar"});
  CHECK_THAT(added.err, Catch::Contains("('verify' reports extra/foo as added)"));
  const CliResult removed = run_cli({"extra", "rm", "-q", model, "foo"});  // not in the stamp: covered again
  CHECK(removed.err.empty());
  CHECK(run_cli({"verify", "-q", model}).code == 0);
}
