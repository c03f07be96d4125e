// JSON and text that came from an archive: the bounded JSON parse, the
// terminal escaper, and the commands that use them.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "helpers.h"
#include "base/bounded_json.h"
#include "base/error.h"
#include "base/strings.h"
#include "base/utf8.h"
#include "core/edit/extra.h"
#include "core/provenance/producer_info.h"
#include "core/inputs/run_check.h"
#include "base/terminal_text.h"

using namespace tsarchive;
namespace fs = std::filesystem;

namespace {

std::string nested(size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}



// No byte that a terminal acts on besides \n: what every text view must hold to.
bool terminal_safe(const std::string& text) {
  return !needs_escape(text, TextEscape::Block) && text.find('\r') == std::string::npos;
}

}  // namespace

// escape_text ---------------------------------------------------------------

TEST_CASE("escape_text: C0, DEL, C1, bidi and bytes that are not UTF-8 are spelled out") {
  CHECK(escape_text("red\x1b[31mtext") == "red\\x1b[31mtext");
  CHECK(escape_text("fake\rrow") == "fake\\rrow");
  CHECK(escape_text("two\nlines\tand tab") == "two\\nlines\\tand tab");
  CHECK(escape_text(std::string("nul\0bell\x07" "del\x7f", 13)) == "nul\\x00bell\\x07del\\x7f");
  CHECK(escape_text("csi \xc2\x9b" "2J") == "csi \\u009b2J");      // U+009B, the C1 form of ESC [
  CHECK(escape_text("x\xe2\x80\xaetxt.exe") == "x\\u202etxt.exe");  // U+202E right-to-left override
  CHECK(escape_text("\xe2\x81\xa6\xe2\x81\xa9\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f") ==
        "\\u2066\\u2069\\u061c\\u200e\\u200f");
  // A line break some viewers draw, and characters that draw nothing (two
  // record names that differ by one look the same): Default_Ignorable_Code_Point.
  CHECK(escape_text("ok\xe2\x80\xa8tsarchive: fake\xe2\x80\xa9") == "ok\\u2028tsarchive: fake\\u2029");
  CHECK(escape_text("extra/\xe2\x80\x8bstamp\xef\xbb\xbf\xe2\x81\xa0\xe2\x81\xa4\xe1\xa0\x8e") ==
        "extra/\\u200bstamp\\ufeff\\u2060\\u2064\\u180e");
  // labels.json with a soft hyphen, a joiner, a variation selector and a tag character.
  CHECK(escape_text("lab\xc2\xad" "els\xe2\x80\x8d.js\xef\xb8\x8fon\xf3\xa0\x81\x81") ==
        "lab\\u00adels\\u200d.js\\ufe0fon\\U0e0041");
  // In a block of text (code, a file's content) joiners and variation
  // selectors stay: emoji and scripts are spelled with them.
  CHECK(escape_text("\xe2\x80\x8d\xe2\x80\x8c\xef\xb8\x8f", TextEscape::Block) == "\xe2\x80\x8d\xe2\x80\x8c\xef\xb8\x8f");
  CHECK(escape_text("\xc2\xad", TextEscape::Block) == "\\u00ad");
  // Not UTF-8: a stray continuation byte, 0xff, an overlong '/', a surrogate, a cut sequence.
  CHECK(escape_text("a\x80" "b\xff") == "a\\x80b\\xff");
  CHECK(escape_text("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(escape_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(escape_text("end\xe2\x80") == "end\\xe2\\x80");
}

TEST_CASE("escape_text: ordinary text is unchanged, and escaping twice changes nothing") {
  for (const std::string s : {"", "labels.json", "config/train.yaml", "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad",
                              "a\\x1b is already spelled out", "\xc2\xa0nbsp"}) {
    CHECK(escape_text(s) == s);
    CHECK_FALSE(needs_escape(s));
  }
  const std::string hostile = "a\x1b\r\n\xc2\x9b\xe2\x80\xae\xff";
  CHECK(needs_escape(hostile));
  CHECK(escape_text(escape_text(hostile)) == escape_text(hostile));
  CHECK_FALSE(needs_escape(escape_text(hostile)));
}

TEST_CASE("errors: a NUL byte is spelled \\x00, so the message after it is kept") {
  // what() is a C string: a NUL from a file used to end the message there.
  const Error e(ErrorKind::BadInput, std::string("dtype '<f4\0x\0' (a type torch does not have)", 43), "f.npy");
  CHECK(std::string(e.what()) == "dtype '<f4\\x00x\\x00' (a type torch does not have)");
  CHECK(escape_text(e.what()) == e.what());  // as escape_text spells it: printing changes nothing more
  CHECK(escape_text(std::string(1, '\0')) == "\\x00");
  CHECK(std::string(e.with_file("g.npy").what()) == e.what());
}

TEST_CASE("escape_text: a block keeps its lines, tabs and CRLF pairs, not a lone CR") {
  CHECK(escape_text("line 1\n\tline 2\r\nline 3\n", TextEscape::Block) == "line 1\n\tline 2\r\nline 3\n");
  CHECK(escape_text("cat\rdog\n", TextEscape::Block) == "cat\\rdog\n");
  CHECK(escape_text("end\r", TextEscape::Block) == "end\\r");
  CHECK(escape_text("\x1b]0;title\x07\n", TextEscape::Block) == "\\x1b]0;title\\x07\n");
  CHECK_FALSE(needs_escape("a\nb\tc\r\n", TextEscape::Block));
  CHECK(needs_escape("a\nb\tc\r\n", TextEscape::Line));
}

// bounded JSON ----------------------------------------------------------------

TEST_CASE("bounded JSON: the depth is measured before nlohmann parses anything") {
  CHECK(parse_bounded_json(nested(JsonLimits::kDepth)).has_value());
  std::string problem;
  CHECK_FALSE(parse_bounded_json(nested(JsonLimits::kDepth + 1), &problem).has_value());
  CHECK(problem == "JSON nested deeper than 512 levels");
  // 100,000 levels crashed every command that previewed it; now it is a
  // refusal that costs one pass over the bytes.
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(parse_bounded_json(nested(100000), &problem).has_value());
  CHECK(problem == "JSON nested deeper than 512 levels");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  // Objects count as well, and unbalanced input is measured the same way.
  CHECK(json_limit_problem(std::string(600, '{')).has_value());
  CHECK(json_limit_problem(std::string(100000, '[')).has_value());
  // Brackets inside strings (even after an escaped quote) do not count.
  CHECK(parse_bounded_json("[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]").has_value());
  // Syntax errors are nlohmann's to find.
  CHECK_FALSE(parse_bounded_json("{\"a\": }", &problem).has_value());
  CHECK(problem == kNotValidJson);
  // The size limit.
  CHECK(json_limit_problem("[1]", 512, 2) == std::optional<std::string>("JSON larger than 0 MiB (3 bytes)"));
  CHECK(json_limit_problem(std::string((16 << 20) + 1, ' ')).value() == "JSON larger than 16 MiB (16777217 bytes)");
  // ordered_json too (the stamp is echoed in key order).
  CHECK(parse_bounded_json<nlohmann::ordered_json>("{\"b\": 1, \"a\": 2}")->dump() == "{\"b\":1,\"a\":2}");
}

TEST_CASE("bounded JSON: one member parsed apart in the text's order, in linear time") {
  const auto keys = [](const nlohmann::ordered_json& object) {
    std::string out;
    for (const auto& [key, value] : object.items()) out += key + ",";
    return out;
  };
  const std::string text =
      R"({"inputs": [{"z": 1}], "parameters": {"m": {"z": 1, "y": 2}, "a": [{"q": 1, "p": 2}], "b": 3}, "id": "x"})";
  const auto parsed = parse_bounded_json_apart(text, "parameters");
  REQUIRE(parsed.has_value());
  REQUIRE(parsed->member.has_value());
  const nlohmann::ordered_json& parameters = *parsed->member;
  CHECK(keys(parameters) == "m,a,b,");
  CHECK(keys(parameters.at("m")) == "z,y,");
  CHECK(keys(parameters.at("a").at(0)) == "q,p,");
  CHECK(parameters.at("b") == 3);
  // The rest is the document without the member, made once.
  CHECK(parsed->rest == nlohmann::json::parse(R"({"inputs": [{"z": 1}], "id": "x"})"));
  CHECK(parse_bounded_json_apart(text, "id")->member == nlohmann::ordered_json("x"));
  CHECK(parse_bounded_json_apart(text, "id")->rest.size() == 2);
  CHECK_FALSE(parse_bounded_json_apart(text, "absent")->member.has_value());
  CHECK(parse_bounded_json_apart(text, "absent")->rest == nlohmann::json::parse(text));
  CHECK(parse_bounded_json_apart(R"({"p": null})", "p")->member == nlohmann::ordered_json(nullptr));
  // A scalar member before the top-level object's end, and beside nested keys of the same name.
  const auto scalar = parse_bounded_json_apart(R"({"a": {"p": [1]}, "p": 2})", "p");
  CHECK(scalar->member == nlohmann::ordered_json(2));
  CHECK(scalar->rest == nlohmann::json::parse(R"({"a": {"p": [1]}})"));
  CHECK(parse_bounded_json_apart("[1, 2]", "p")->rest == nlohmann::json::parse("[1, 2]"));
  // A key given twice keeps its first place and its last value, as a Python dict does.
  const auto twice = parse_bounded_json_apart(R"({"p": {"x": 1, "y": 2, "x": 3}})", "p");
  CHECK(keys(*twice->member) == "x,y,");
  CHECK(twice->member->at("x") == 3);
  CHECK(parse_bounded_json_apart(R"({"p": 1, "q": 0, "p": [2]})", "p")->member == nlohmann::ordered_json({2}));
  std::string problem;
  CHECK_FALSE(parse_bounded_json_apart(R"({"p": {"x": })", "p", &problem).has_value());
  CHECK(problem == kNotValidJson);
  CHECK_FALSE(parse_bounded_json_apart(R"({"q": 1} [])", "p", &problem).has_value());  // garbage after the document
  CHECK_FALSE(parse_bounded_json_apart(std::string(600, '[') + std::string(600, ']'), "p", &problem).has_value());
  CHECK_THAT(problem, Catch::Contains("deeper"));
  // A million keys: ordered_map's own parser looks each up among the others
  // (hours); this one indexes them (about a second).
  std::string many = R"({"p": {)";
  for (int i = 0; i < 1000000; ++i) many += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  many += "}}";
  const auto big = parse_bounded_json_apart(many, "p", nullptr, JsonLimits::kDepth, many.size(), UINT64_MAX);  // as serve
  REQUIRE(big.has_value());
  CHECK(big->member->size() == 1000000);
  CHECK(big->member->begin().key() == "0");
  CHECK(big->rest.empty());
}

TEST_CASE("bounded JSON: pretty printing is refused when the indentation would blow it up") {
  CHECK(pretty_json("{\"a\": [1, 2]}").value() == "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  // 300 levels repeated: ~1.8 KB of input per copy, ~180 KB pretty-printed.
  std::string wide = "[";
  for (int i = 0; i < 200; ++i) wide += (i ? "," : "") + nested(300);
  wide += "]";
  std::string problem;
  CHECK_FALSE(pretty_json(wide, &problem).has_value());
  CHECK(problem == "pretty-printed, it would be more than 16 MiB");
  CHECK(parse_bounded_json(wide).has_value());  // compact is fine
  // The estimate is an upper bound of what nlohmann writes.
  const std::string doc = R"({"classes": ["cat", "dog", 1e9, 0.5, true, null, "a\"b\u00e9"], "x": {"y": [[], {}]}})";
  CHECK(pretty_json(doc)->size() <= measure_json(doc).pretty_bytes);
}

TEST_CASE("bounded JSON: extra previews, the stamp and the run self-check refuse deep JSON as data") {
  ExtraFileInfo info;
  describe_extra_content(nested(100000), info);
  CHECK(info.text);
  CHECK_FALSE(info.json);
  CHECK(info.json_problem == "JSON nested deeper than 512 levels");
  CHECK(info.preview == std::string(72, '[') + "...");
  describe_extra_content("{\"a\":  [1, 2]}", info);
  CHECK(info.json);
  CHECK(info.json_problem.empty());
  CHECK(info.preview == "{\"a\":[1,2]}");
  describe_extra_content("plain text\n", info);
  CHECK_FALSE(info.json);
  CHECK(info.json_problem.empty());

  try {
    parse_stamp(nested(100000), "model.pt");
    FAIL("parse_stamp accepted it");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK_THAT(e.what(), Catch::Contains("holds JSON nested deeper than 512 levels"));
  }
  try {
    parse_run_check("{\"_type\": " + nested(100000) + "}", "model.pt");
    FAIL("parse_run_check accepted it");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK_THAT(e.what(), Catch::Contains("holds JSON nested deeper than 512 levels"));
  }
}

// The commands ------------------------------------------------------------------

TEST_CASE("deep JSON in an archive: listed, inspected and verified, never a crash") {
  const std::string deep = testdata("hostile/extra_json_deep.pt");
  const CliResult list = run_cli({"extra", "list", deep});
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Catch::Contains("deep.json"));

  const CliResult listed_json = run_cli({"extra", "list", "--json", deep});
  REQUIRE(listed_json.code == 0);
  const auto doc = nlohmann::json::parse(listed_json.out);
  CHECK(doc["extra_files"].back()["json"] == false);
  CHECK(doc["extra_files"].back()["json_problem"] == "JSON nested deeper than 512 levels");

  CHECK(run_cli({"inspect", deep}).code == 0);
  CHECK(run_cli({"verify", deep}).code == 0);

  // Printed as stored (200,000 bytes, not 20 GB of indentation), with one note.
  const CliResult shown = run_cli({"inspect", "--extra", "deep.json", deep});
  CHECK(shown.code == 0);
  CHECK(shown.out == nested(100000));
  CHECK(shown.err ==
        "tsarchive: note: extra file 'deep.json' is printed as stored, not pretty-printed: JSON nested deeper "
        "than 512 levels\n");
  const CliResult shown_json = run_cli({"inspect", "--extra", "deep.json", "--json", deep});
  REQUIRE(shown_json.code == 0);
  const auto extra = nlohmann::json::parse(shown_json.out);
  CHECK_FALSE(extra.contains("json"));
  CHECK(extra["json_problem"] == "JSON nested deeper than 512 levels");

  // A producer_info.json that does not name tsarchive's schema is its
  // producer's own: read within the limits, kept, never a stamp.
  const CliResult stamp = run_cli({"verify", testdata("hostile/stamp_json_deep.pt")});
  CHECK(stamp.code == 0);
  CHECK_THAT(stamp.out, Catch::Contains("not stamped by tsarchive; producer info present"));

  // Our stamp beside it (extra/tsarchive/), then made too deep: unreadable, by its own name.
  TempDir dir;
  const std::string model = dir.copy("hostile/stamp_json_deep.pt");
  REQUIRE(run_cli({"stamp", "-q", "--keep-bytes", "--no-git", "--no-host", model}).code == 0);
  const std::string deep_stamp = dir.file("deep_stamp.pt");
  std::ofstream(deep_stamp, std::ios::binary) << archive_with_record(model, "extra/tsarchive/producer_info.json", nested(1000));
  const CliResult unreadable = run_cli({"verify", deep_stamp});
  CHECK(unreadable.code == 1);
  CHECK_THAT(unreadable.out,
             Catch::Contains("unreadable: extra/tsarchive/producer_info.json holds JSON nested deeper than 512 levels"));
}

TEST_CASE("extra set refuses a .json value it could not read back; other names store any bytes") {
  TempDir dir;
  const std::string model = dir.copy("mlp_scripted.pt");
  const std::string before = slurp(model);
  const CliResult refused = run_cli({"extra", "set", model, "deep.json=" + nested(1000)});
  CHECK(refused.code == 2);
  CHECK(refused.out.empty());
  CHECK(refused.err ==
        "tsarchive: error: cannot set 'deep.json': its value is JSON nested deeper than 512 levels: a .json extra "
        "file must be readable as JSON; flatten it, or store it under a name that does not end in .json\n");
  CHECK(slurp(model) == before);
  CHECK(run_cli({"extra", "set", model, "ok.json=" + nested(512)}).code == 0);
  CHECK(run_cli({"extra", "set", model, "deep.txt=" + nested(1000)}).code == 0);
  CHECK(run_cli({"extra", "get", model, "deep.txt"}).out == nested(1000));
}

TEST_CASE("control characters in entry names are escaped in every view and in error lines") {
  const std::string file = testdata("hostile/name_control_chars.pt");
  CHECK(terminal_safe(run_cli({"verify", file}).out));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"extra", "list", file}, {"inspect", file}, {"inspect", "--records", file},
        {"diff", testdata("hostile/ok_rebuilt.pt"), file}, {"extra", "get", file, "nope"}}) {
    const CliResult r = run_cli(args);
    INFO(args[0] << " " << args[1]);
    CHECK(r.code <= 3);
    CHECK(terminal_safe(r.out));
    CHECK(terminal_safe(r.err));
    CHECK_THAT(r.out + r.err, Catch::Contains("red\\x1b[31mtext"));
    CHECK_THAT(r.out + r.err, Catch::Contains("fake\\rrow"));
    CHECK_THAT(r.out + r.err, Catch::Contains("two\\nlines"));
  }
  // JSON stays exact: the names are the bytes, in JSON's own escapes.
  const CliResult listed_json = run_cli({"extra", "list", "--json", file});
  REQUIRE(listed_json.code == 0);
  const auto doc = nlohmann::json::parse(listed_json.out);
  CHECK(doc["extra_files"][3]["name"] == "red\x1b[31mtext");
  CHECK(doc["extra_files"][5]["name"] == "two\nlines");
}

TEST_CASE("extra rm takes a name as extra list shows it; set names the entries it keeps") {
  TempDir dir;
  const std::string model = dir.copy("hostile/name_control_chars.pt");
  const CliResult set = run_cli({"extra", "set", model, "build.txt=42"});
  CHECK(set.code == 0);
  CHECK_THAT(set.err, Catch::Contains("tsarchive: note: kept the entry 'mlp_scripted/extra/red\\x1b[31mtext', whose "
                                      "name has control, bidi or non-UTF-8 characters; remove it with: tsarchive "
                                      "extra rm " + model + " $'red\\x1b[31mtext'"));
  CHECK(std::count(set.err.begin(), set.err.end(), '\n') == 3);
  CHECK(terminal_safe(set.err));

  const CliResult rm = run_cli({"extra", "rm", model, "red\\x1b[31mtext", "fake\\rrow", "two\\nlines"});
  CHECK(rm.code == 0);
  CHECK(terminal_safe(rm.out));
  CHECK(rm.err.empty());
  const CliResult left = run_cli({"extra", "list", "--json", model});
  const auto left_doc = nlohmann::json::parse(left.out);
  std::vector<std::string> names;
  for (const auto& e : left_doc["extra_files"]) names.push_back(e["name"]);
  CHECK(names == std::vector<std::string>{"config/train.yaml", "model_card.md", "labels.json", "build.txt"});
  // A name that is neither there nor shown so is still checked as a name.
  CHECK(run_cli({"extra", "rm", model, "a\x1b" "b"}).code == 2);
}

TEST_CASE("control, C1 and bidi characters in a file's content: exact bytes to a pipe, escaped in views") {
  const std::string file = testdata("hostile/extra_terminal_controls.pt");
  const std::string content = "cat\rdog \xc2\x9b" "2J fake \xe2\x80\xae" "evil.txt\n";
  CHECK(run_cli({"extra", "get", file, "notes.txt"}).out == content);  // not a terminal: byte-exact
  const CliResult list = run_cli({"extra", "list", file});
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Catch::Contains("cat ..."));  // a preview ends at the first CR or LF
  const CliResult got_json = run_cli({"extra", "get", "--json", file, "notes.txt"});
  CHECK(nlohmann::json::parse(got_json.out)["text"] == content);

  // A JSON value's compact preview keeps its UTF-8; the table escapes it.
  TempDir dir;
  const std::string model = dir.copy("mlp_scripted.pt");
  REQUIRE(run_cli({"extra", "set", model, "bidi.json={\"a\": \"\u202e\u009b\"}"}).code == 0);
  const CliResult bidi = run_cli({"extra", "list", model});
  CHECK(terminal_safe(bidi.out));
  CHECK_THAT(bidi.out, Catch::Contains("{\"a\":\"\\u202e\\u009b\"}"));
  // inspect --extra pretty-prints it as the same JSON, the characters as JSON escapes.
  const CliResult pretty = run_cli({"inspect", "--extra", "bidi.json", model});
  CHECK(pretty.out == "{\n  \"a\": \"\\u202e\\u009b\"\n}\n");
  CHECK(nlohmann::json::parse(pretty.out)["a"] == "\xe2\x80\xae\xc2\x9b");
}

TEST_CASE("JSON output: bytes that are not UTF-8 are written losslessly as \\udcXX (surrogateescape)") {
  using tsarchive::cli::json_text;
  const nlohmann::ordered_json plain = {{"name", "caf\xc3\xa9"}, {"n", 1}};
  CHECK(json_text(plain) == plain.dump(2));
  // The marker is a private-use character no string holds, so one that
  // appears in the document (U+E000 here) stays as it is.
  const nlohmann::ordered_json doc = {{"ok", "\xee\x80\x80"}, {"bad\xfe", {"x\xff" "y", "\xc3"}}};
  CHECK(json_text(doc) ==
        "{\n  \"ok\": \"\xee\x80\x80\",\n  \"bad\\udcfe\": [\n    \"x\\udcffy\",\n    \"\\udcc3\"\n  ]\n}");

  // An entry name that is not UTF-8 is refused as a ZIP readers read
  // differently (Python's zipfile as CP437); the error line escapes it.
  const std::string file = testdata("hostile/name_not_utf8.pt");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"extra", "list", "--json", file},
                                               {"inspect", "--json", file}, {"verify", "--json", file}}) {
    const CliResult r = run_cli(args);
    INFO(args[0]);
    CHECK(r.code == 3);
    CHECK_THAT(r.err, Catch::Contains("bad\\xffname") && Catch::Contains("not UTF-8"));
    CHECK(r.err.find('\xff') == std::string::npos);
  }
}

namespace {
// The byte-at-a-time definitions the eight-bytes-at-once fast paths must agree with.
bool reference_valid(std::string_view s) {
  uint32_t cp = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    if ((len = utf8_sequence_at(s, i, cp)) == 0) return false;
  }
  return true;
}
bool reference_printable(std::string_view s) {
  uint32_t cp = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    if ((len = utf8_sequence_at(s, i, cp)) == 0) return false;
    if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7f) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("UTF-8 checks: the word-at-a-time fast paths agree with byte-at-a-time decoding") {
  // Every byte value at every position of printable text of several lengths
  // (words, their tails, sequences across a word boundary).
  for (size_t size : {1, 7, 8, 9, 16, 17, 23}) {
    for (size_t at = 0; at < size; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string s(size, 'a');
        s[at] = static_cast<char>(b);
        INFO("size " << size << ", byte " << b << " at " << at);
        CHECK(is_valid_utf8(s) == reference_valid(s));
        CHECK(is_printable_utf8(s) == reference_printable(s));
      }
    }
  }
  for (const char* piece : {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xc0\xaf", "\x7f", "\t\r\n"}) {
    for (size_t at = 0; at < 12; ++at) {
      std::string s(20, 'x');
      s.replace(at, std::strlen(piece), piece);
      INFO("piece at " << at);
      CHECK(is_valid_utf8(s) == reference_valid(s));
      CHECK(is_printable_utf8(s) == reference_printable(s));
    }
  }
  CHECK(is_printable_utf8("def forward(self, x: Tensor) -> Tensor:\n    return x\n"));
  CHECK_FALSE(is_printable_utf8("def forward(self):\n    return \x1b[2J\n"));
}

TEST_CASE("bounded JSON: a NUL byte is not JSON, and nothing after it goes unread") {
  using namespace std::string_literals;
  std::string problem;
  CHECK_FALSE(parse_bounded_json("{\"a\": 1}\0{\"b\": 2}"s, &problem));
  CHECK(problem == kNotValidJson);
  CHECK_FALSE(parse_bounded_json("[1]\0"s));
  CHECK_FALSE(parse_bounded_json_apart("{\"a\": 1}\0garbage"s, "a", &problem));
  CHECK(parse_bounded_json("{\"a\": \"\\u0000\"}"));  // an escaped NUL in a string is JSON
}

TEST_CASE("bounded JSON: the values are counted before nlohmann parses any") {
  std::string flood = "[";
  for (int i = 0; i < 1000; ++i) flood += "{},";
  flood += "{}]";
  CHECK(measure_json(flood).values == 1 + 1 + 1001 + 1000);  // one, the array, its objects, the commas
  std::string problem;
  CHECK_FALSE(parse_bounded_json(flood, &problem, JsonLimits::kDepth, JsonLimits::kBytes, 1000));
  CHECK(problem == "JSON of more than 1000 values");
  CHECK(parse_bounded_json(flood, &problem, JsonLimits::kDepth, JsonLimits::kBytes, 3000));
  CHECK(measure_json("{\"a\": [1, \"x,y:z\"]}").values == 5);  // not inside strings
  CHECK_FALSE(parse_bounded_json_apart(flood, "a", &problem, JsonLimits::kDepth, JsonLimits::kBytes, 10));
}

TEST_CASE("shell_quoted: a name from an archive never becomes shell syntax in a suggested command") {
  CHECK(shell_quoted("model.pt") == "model.pt");
  CHECK(shell_quoted("my model.pt") == "'my model.pt'");
  CHECK(shell_quoted("it's") == "'it'\\''s'");
  CHECK(shell_quoted("") == "''");
  // review 56a, F4: the name that turned the old hint into a command.
  CHECK(shell_quoted("\x01';touch${IFS}/tmp/PWNED;'") == "$'\\x01\\x27;touch${IFS}/tmp/PWNED;\\x27'");
  CHECK(shell_quoted("a\\b\xe2\x80\xae") == "$'a\\x5cb\\xe2\\x80\\xae'");
  // bash reads each form back to the same bytes.
  if (std::system("bash -c true >/dev/null 2>&1") != 0) return;
  for (const std::string& name : {std::string("x y"), std::string("it's"), std::string("\x01';touch x;'"),
                                 std::string("$(id)`id`\\\n\xff")}) {
    TempDir dir;
    const std::string out = (dir.path / "out").string();
    const std::string command = "bash -c 'printf %s \"$1\" > \"$2\"' _ " + shell_quoted(name) + " " + shell_quoted(out);
    REQUIRE(std::system(("bash -c " + shell_quoted(command)).c_str()) == 0);
    std::ifstream in(out, std::ios::binary);
    const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(back == name);
  }
}
