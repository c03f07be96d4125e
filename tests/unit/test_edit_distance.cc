// "did you mean": the edit distance, the threshold of closest_match, and the
// suggestions the CLI makes from them.
#include <catch2/catch.hpp>

#include "base/edit_distance.h"
#include "helpers.h"

using tsarchive::closest_match;
using tsarchive::edit_distance;

TEST_CASE("edit distance: insertions, deletions, substitutions, adjacent transpositions") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("inspect", "inspect") == 0);
  CHECK(edit_distance("inpsect", "inspect") == 1);  // transposition
  CHECK(edit_distance("inspct", "inspect") == 1);   // deletion
  CHECK(edit_distance("innspect", "inspect") == 1); // insertion
  CHECK(edit_distance("flaot32", "float32") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("ca", "abc") == 3);  // optimal string alignment, not full Damerau (2)
  CHECK(edit_distance("JSON", "json") == 0);  // ASCII case folded
  CHECK(edit_distance("abc", "xyz") == edit_distance("xyz", "abc"));
}

TEST_CASE("closest_match: near enough for the word's length, ties to the first, none for exact or far") {
  const std::vector<std::string> commands = {"inspect", "extra", "stamp", "verify", "diff", "run", "trace", "convert"};
  CHECK(closest_match("inpsect", commands) == std::optional<std::string>("inspect"));
  CHECK(closest_match("verfy", commands) == std::optional<std::string>("verify"));
  CHECK(closest_match("rnu", commands) == std::optional<std::string>("run"));
  CHECK(closest_match("frobnicate", commands) == std::nullopt);
  CHECK(closest_match("inspect", commands) == std::nullopt);  // not a slip
  CHECK(closest_match("x", {"y"}) == std::nullopt);           // one letter is no evidence
  CHECK(closest_match("ab", {"xy"}) == std::nullopt);         // 2 edits: too far for 2 letters
  CHECK(closest_match("dif", {"diff", "dig"}) == std::optional<std::string>("diff"));  // tie: the first
  CHECK(closest_match("--jsn", {"--help", "--json", "--records"}) == std::optional<std::string>("--json"));
  CHECK(tsarchive::did_you_mean("forwrd", {"forward", "scaled"}) == "did you mean 'forward'? ");
  CHECK(tsarchive::did_you_mean("predict", {"forward", "scaled"}).empty());
}

TEST_CASE("cli: suggestions for commands, options, subcommands, input specs, extra names; tsarchive help") {
  const std::string model = testdata("mlp_scripted.pt");
  const CliResult command = run_cli({"inpsect", model});
  CHECK(command.code == 2);
  CHECK(command.err == "tsarchive: error: unknown command 'inpsect': did you mean 'tsarchive inspect'? (see 'tsarchive --help')\n");
  CHECK_THAT(run_cli({"extra", "ls", model}).err, Catch::Contains("did you mean 'tsarchive extra list'?"));
  CHECK_THAT(run_cli({"extra", "remove", model, "x"}).err, Catch::Contains("did you mean 'tsarchive extra rm'?"));
  CHECK_THAT(run_cli({"extra"}).err, Catch::Contains("'tsarchive extra' needs a command (list, get, set, rm, export, import)"));
  CHECK_THAT(run_cli({"verify", "--requrie-stamp", model}).err, Catch::Contains("did you mean '--require-stamp'?"));
  // Unknown without a near name: CLI11's own message stands.
  CHECK_THAT(run_cli({"inspect", "--bogus", model}).err, Catch::Contains("The following argument was not expected: --bogus"));

  const CliResult dash = run_cli({"run", model, "-input", "2x8"});
  CHECK(dash.code == 2);
  CHECK_THAT(dash.err, Catch::Contains("'-input' reads as '-i nput': did you mean '--input'?"));
  CHECK(run_cli({"diff", "-q", model, model}).code == 0);  // a real short flag is no slip

  CHECK_THAT(run_cli({"run", model, "--input", "in.npy"}).err, Catch::Contains("write '@in.npy'"));
  CHECK_THAT(run_cli({"run", model, "--input", "1,3,224,224:float16"}).err,
             Catch::Contains("did you mean '1x3x224x224:float16'?"));
  CHECK_THAT(run_cli({"run", model, "--input", "(2, 8)"}).err, Catch::Contains("did you mean '2x8'?"));
  CHECK_THAT(run_cli({"run", model, "--input", "2x8:flaot32"}).err, Catch::Contains("did you mean 'float32'?"));
  CHECK_THAT(run_cli({"extra", "get", model, "labls.json"}).err, Catch::Contains("did you mean 'labels.json'? it has:"));
  CHECK_THAT(run_cli({"extra", "rm", model, "labls.json"}).err, Catch::Contains("did you mean 'labels.json'? it has:"));

  const CliResult help = run_cli({"help", "extra", "set"});
  CHECK(help.code == 0);
  CHECK(help.out == run_cli({"extra", "set", "--help"}).out);
  CHECK(run_cli({"help"}).out == run_cli({"--help"}).out);
  const CliResult unknown = run_cli({"help", "extra", "st"});
  CHECK(unknown.code == 2);
  CHECK_THAT(unknown.err, Catch::Contains("unknown command 'st' for 'tsarchive extra': did you mean 'tsarchive extra set'?"));
}
