// run's libtorch-free parts: condensed libtorch messages, latency summaries,
// the recorded check's JSON, and the profile views (operator table, Chrome trace).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/error.h"
#include "contract/profile.h"
#include "contract/run.h"
#include "core/inputs/run_check.h"
#include "contract/torch_message.h"

using namespace tsarchive;

namespace {

// Texts libtorch 1.13 gives (what_without_backtrace()), shortened where they repeat.
const char* kTraceback =
    "The following operation failed in the TorchScript interpreter.\n"
    "Traceback of TorchScript, serialized code (most recent call last):\n"
    "  File \"code/__torch__/models.py\", line 9, in forward\n"
    "      ops.prim.RaiseException(\"raises.pt: input sum is positive\", \"builtins.ValueError\")\n"
    "      ~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
    "\n"
    "Traceback of TorchScript, original code (most recent call last):\n"
    "  File \"/home/someone/models.py\", line 187, in forward\n"
    "            raise ValueError(\"raises.pt: input sum is positive\")\n"
    "builtins.ValueError: raises.pt: input sum is positive\n";

const char* kUnknownOp =
    "\nUnknown builtin op: tsarchive_test::add_one.\n"
    "Could not find any similar ops to tsarchive_test::add_one. This op may not exist or may not be currently "
    "supported in TorchScript.\n:\n  File \"code/__torch__.py\", line 8\n";

const char* kCudaDispatch =
    "Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend. This could be because the operator "
    "doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom "
    "build).\n\nCPU: registered at aten/src/ATen/RegisterCPU.cpp:30798 [kernel]\nMeta: registered at ...\n";

}  // namespace

TEST_CASE("libtorch messages are condensed to one line that says what to do", "[run]") {
  SECTION("an exception raised by TorchScript code names its cause and the archive's code location") {
    const Error e = condense_torch_message(kTraceback, "m.pt", "run forward");
    CHECK(e.kind() == ErrorKind::Torch);
    CHECK(std::string(e.what()) == "run forward failed: ValueError: raises.pt: input sum is positive (at code/__torch__/models.py:9)");
    CHECK(e.detail() == kTraceback);
    CHECK(e.hint().rfind("the model's code raised it on these inputs", 0) == 0);
    CHECK(e.file() == "m.pt");
  }
  SECTION("an unknown custom class suggests --load-library too") {
    const Error e = condense_torch_message(
        "\nUnknown type name '__torch__.torch.classes.my_ns.Tokenizer':\n  File \"code/__torch__/m.py\", line 4\n",
        "m.pt", "load the module");
    CHECK(std::string(e.what()).find("custom class __torch__.torch.classes.my_ns.Tokenizer") != std::string::npos);
    CHECK(e.hint().find("--load-library") != std::string::npos);
  }
  SECTION("an unknown operator suggests --load-library") {
    const Error e = condense_torch_message(kUnknownOp, "m.pt", "load the module");
    CHECK(std::string(e.what()).find("operator tsarchive_test::add_one,") != std::string::npos);
    CHECK(e.hint().find("--load-library") != std::string::npos);
  }
  SECTION("an aten:: operator the linked libtorch lacks names the libtorch, not --load-library") {
    const std::string raw =
        "\nUnknown builtin op: aten::scaled_dot_product_attention.\nCould not find any similar ops to "
        "aten::scaled_dot_product_attention.\n";
    const Error e = condense_torch_message(raw, "m.pt", "load the module", "1.13");
    CHECK(std::string(e.what()) == "uses aten::scaled_dot_product_attention, which libtorch 1.13 lacks");
    CHECK(e.hint().rfind("use a tsarchive built against libtorch 2.x", 0) == 0);
    const Error newer = condense_torch_message(raw, "m.pt", "load the module", "2.13");
    CHECK(newer.hint().find("at least as new as the PyTorch that wrote") != std::string::npos);
    // Without the version (unknown libtorch) it stays the generic rule.
    CHECK(std::string(condense_torch_message(raw, "m.pt", "load the module").what()).find("no library loaded") !=
          std::string::npos);
  }
  SECTION("--mobile on a libtorch without XNNPACK") {
    const Error e = condense_torch_message(
        "false INTERNAL ASSERT FAILED at \"xnnpack_rewrite.cpp\":506, please report a bug to PyTorch. Mobile "
        "optimization only available with XNNPACK at the moment. XNNPACK is not enabled. Please build with "
        "USE_XNNPACK=1", "m.pt", "optimize for mobile");
    CHECK(std::string(e.what()) == "this libtorch was built without XNNPACK, which --mobile (optimize_for_mobile) needs");
  }
  SECTION("a format version newer than libtorch reads") {
    const Error e = condense_torch_message(
        "Attempted to read a PyTorch file with version 11, but the maximum supported version for reading is 10. "
        "Your PyTorch installation may be too old.", "m.pt", "load the module");
    CHECK(std::string(e.what()) ==
          "written by a newer PyTorch: format version 11 is newer than this libtorch reads (at most 10)");
    const Error b = condense_torch_message(
        "Lite Interpreter version number does not match. The model version must be between 4 and 9 but the model "
        "version is 10 ()", "m.ptl", "load the module");
    CHECK(std::string(b.what()) == "written by a newer PyTorch: bytecode version 10 is newer than this libtorch reads (4\u20139)");
  }
  SECTION("a CUDA kernel asked of a CPU-only libtorch, without the dispatch-key list") {
    const Error e = condense_torch_message(kCudaDispatch, "m.pt", "load the module");
    CHECK(std::string(e.what()) == "this build's libtorch has no CUDA support (operator aten::empty_strided)");
    CHECK(std::string(e.what()).find("registered at") == std::string::npos);
  }
  SECTION("out of memory, CPU and CUDA") {
    CHECK(std::string(condense_torch_message("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                                             "68719476736 bytes. Error code 12 (Cannot allocate memory)",
                                             "m.pt", "run forward")
                          .what())
              .rfind("out of memory while trying to run forward", 0) == 0);
    CHECK(condense_torch_message("CUDA out of memory. Tried to allocate 2.00 GiB", "m.pt", "run forward").hint().find("--batch-sizes") !=
          std::string::npos);
  }
  SECTION("arguments that do not fit name the declaration") {
    const Error e = condense_torch_message(
        "forward() Expected a value of type 'Tensor' for argument 'x' but instead found type 'int'.\nPosition: 1\n"
        "Declaration: forward(__torch__.M self, Tensor x) -> Tensor",
        "m.pt", "run forward");
    CHECK(e.hint() == "it is declared as forward(__torch__.M self, Tensor x) -> Tensor");
  }
  SECTION("devices mixed inside the model") {
    const Error e = condense_torch_message(
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!", "m.pt",
        "run forward");
    CHECK(std::string(e.what()).rfind("the model mixes devices", 0) == 0);
  }
  SECTION("anything else keeps its first line") {
    const Error e = condense_torch_message("PytorchStreamReader failed locating file constants.pkl: file not found\nmore",
                                           "m.pt", "load the module");
    CHECK(std::string(e.what()) ==
          "libtorch could not load the module: PytorchStreamReader failed locating file constants.pkl: file not found");
  }
}

TEST_CASE("latencies are summarised by nearest rank", "[run]") {
  std::vector<double> ms;
  for (int i = 100; i >= 1; --i) ms.push_back(i);
  const LatencySummary s = summarize_latencies(ms, 5, 8);
  CHECK(s.iterations == 100);
  CHECK(s.warmup == 5);
  CHECK(s.min_ms == 1);
  CHECK(s.max_ms == 100);
  CHECK(s.p50_ms == 50);
  CHECK(s.p90_ms == 90);
  CHECK(s.p99_ms == 99);
  CHECK(s.mean_ms == Approx(50.5));
  CHECK(s.total_s == Approx(5.05));
  CHECK(s.throughput_per_s == Approx(100 * 8 / 5.05));  // items per second with a batch size

  const LatencySummary one = summarize_latencies({2.0}, 0, 0);
  CHECK(one.p50_ms == 2.0);
  CHECK(one.p99_ms == 2.0);
  CHECK(one.throughput_per_s == Approx(500));  // calls per second
  CHECK(summarize_latencies({}, 0, 0).iterations == 0);
}

TEST_CASE("a recorded check round-trips through its JSON", "[run]") {
  RunCheck c;
  c.method = "scaled";
  c.tolerance = Tolerance{1e-4, 0};
  c.tolerance_by_path["out[1]"] = Tolerance{0.5, 0.25};
  c.device = "cpu";
  c.created_at = "2026-11-21T10:00:00Z";
  c.inputs = {"x: Tensor float32 [2, 8]"};
  c.outputs = {"out: Tensor float32 [2, 3]"};
  const std::string rendered = render_run_check(c);
  CHECK(rendered.rfind("{\"_type\":\"https://tsarchive.dev/run-check/v1\"", 0) == 0);
  const RunCheck back = parse_run_check(rendered, "m.pt");
  CHECK(back.method == "scaled");
  CHECK(back.tolerance.atol == 1e-4);
  CHECK(back.tolerance_by_path.at("out[1]").rtol == 0.25);
  CHECK(back.inputs == c.inputs);
  CHECK(back.created_at == c.created_at);

  CHECK_THROWS_MATCHES(parse_run_check("{\"_type\":\"other\"}", "m.pt"), Error,
                       Catch::Matchers::Predicate<Error>([](const Error& e) { return e.kind() == ErrorKind::BadInput; }));
  CHECK_THROWS_AS(parse_run_check("not json", "m.pt"), Error);
  CHECK_THROWS_AS(parse_run_check("{\"_type\":\"https://tsarchive.dev/run-check/v1\",\"method\":3}", "m.pt"), Error);
}

TEST_CASE("a recorded check names how its inputs and outputs are stored", "[run]") {
  RunCheck c;
  CHECK(render_run_check(c).find("encoding") == std::string::npos);  // torch.save bytes: as before
  CHECK(parse_run_check(render_run_check(c), "m.pt").encoding == RunCheckEncoding::TorchSave);
  c.encoding = RunCheckEncoding::Base64;
  CHECK(render_run_check(c).find("\"encoding\":\"base64\"") != std::string::npos);
  CHECK(parse_run_check(render_run_check(c), "m.pt2").encoding == RunCheckEncoding::Base64);
  const std::string other = R"({"_type":"https://tsarchive.dev/run-check/v1","method":"model","atol":0,"rtol":0,)"
                            R"("encoding":"zstd"})";
  CHECK_THROWS_MATCHES(parse_run_check(other, "m.pt2"), Error, Catch::Matchers::Predicate<Error>([](const Error& e) {
                         return e.kind() == ErrorKind::BadInput && std::string(e.what()).find("'zstd'") != std::string::npos;
                       }));

  CHECK(run_check_encoding_for(FileKind::ExportedProgram) == RunCheckEncoding::Base64);
  CHECK(run_check_encoding_for(FileKind::TorchScript) == RunCheckEncoding::TorchSave);
  CHECK(run_check_files(RunCheckEncoding::TorchSave).inputs == "tsarchive/check_inputs.pt");
  CHECK(run_check_files(RunCheckEncoding::Base64).outputs == "tsarchive/check_outputs.pt.b64");

  // The edits: check.json, then the inputs and outputs, base64 text of the same bytes.
  const std::string binary("PK\x03\x04\x00\xff\x80", 7);
  const std::vector<ExtraEdit> edits = run_check_edits(c, binary, "out");
  REQUIRE(edits.size() == 3);
  CHECK(edits[0].name == "tsarchive/check.json");
  CHECK(edits[1].name == "tsarchive/check_inputs.pt.b64");
  CHECK(*edits[1].value == "UEsDBAD/gA==");
  CHECK(*edits[2].value == "b3V0");
  c.encoding = RunCheckEncoding::TorchSave;
  CHECK(*run_check_edits(c, binary, "out")[1].value == binary);
}

TEST_CASE("base64 encodes as RFC 4648 and decodes strictly", "[run]") {
  // RFC 4648's test vectors.
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    CHECK(base64_encode(bytes) == text);
    CHECK(base64_decode(text) == bytes);
  }
  std::string every;
  for (int i = 0; i < 256; ++i) every += static_cast<char>(i);
  for (size_t n = 0; n <= every.size(); n += 37) CHECK(base64_decode(base64_encode(every.substr(0, n))) == every.substr(0, n));
  CHECK(base64_decode("Zm9v\nYmFy\r\n") == std::string("foobar"));  // wrapped lines, a final line break

  const auto problem = [](const std::string& text) {
    std::string why;
    CHECK_FALSE(base64_decode(text, &why).has_value());
    return why;
  };
  CHECK(problem("Zm9v%mFy") == "byte 4 (0x25) is not base64");
  CHECK(problem("Zm9vY") == "its length is not a multiple of 4 (cut short?)");
  CHECK(problem("Zg==Zm9v") == "data after '=' padding at byte 4");
  CHECK(problem("Z===") == "misplaced '=' padding at byte 1");
  CHECK(problem("Zm=v") == "data after '=' padding at byte 3");
  CHECK(problem("Zg===") == "misplaced '=' padding at byte 4");
}

// --- run --profile: the operator table and the Chrome trace (profile.h) ------------

namespace {

ProfileReport two_operator_profile(double sample) {
  ProfileReport report;
  report.model_id = "m";
  report.calls = 10;
  report.wall_ms = 2.0;
  report.observed.sample = sample;
  report.observed.sampled_calls = 5;
  // The same operator under two model ids aggregates into one row.
  report.observed.operators = {{"aten::addmm", "function", "a", "", 2, 400'000, 300'000, 150'000, 250'000},
                               {"aten::addmm", "function", "b", "", 1, 200'000, 100'000, 200'000, 200'000},
                               {"forward", "torchscript", "a", "", 2, 1'000'000, 500'000, 400'000, 600'000}};
  report.observed.events = {{"forward", "torchscript", "m", 1, 5'000, 1'000'000, 400'000, ""},
                            {"aten::addmm", "function", "m", 1, 6'000, 200'000, 200'000, "[[16], [1, 8]]"},
                            {"aten::t", "function", "m", 2, 7'500, 1'000, 1'000, ""}};
  return report;
}

}  // namespace

TEST_CASE("operator table: rows by self time, counts and times scaled by 1/P") {
  const OperatorTable exact = operator_table(two_operator_profile(1.0));
  REQUIRE(exact.rows.size() == 2);
  CHECK_FALSE(exact.estimated);
  CHECK(exact.rows[0].name == "forward");  // self 0.5 ms > addmm's 0.4 ms
  const OperatorRow& addmm = exact.rows[1];
  CHECK(addmm.observed_calls == 3);
  CHECK(addmm.calls == Approx(3));
  CHECK(addmm.calls_per_method_call == Approx(0.3));
  CHECK(addmm.total_ms == Approx(0.6));
  CHECK(addmm.self_ms == Approx(0.4));
  CHECK(addmm.average_us == Approx(200));
  CHECK(addmm.self_percent == Approx(20));
  CHECK(exact.self_ms == Approx(0.9));

  const OperatorTable sampled = operator_table(two_operator_profile(0.1));
  CHECK(sampled.estimated);
  CHECK(sampled.rows[1].calls == Approx(30));
  CHECK(sampled.rows[1].self_ms == Approx(4.0));
  CHECK(sampled.rows[1].average_us == Approx(200));  // an average needs no scaling
}

TEST_CASE("chrome trace: complete events from the first start, a named track per thread") {
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(two_operator_profile(1.0), "tsarchive run m.pt", 42));
  const auto& events = trace.at("traceEvents");
  std::vector<nlohmann::json> complete, threads;
  for (const auto& e : events) {
    if (e.at("ph") == "X") complete.push_back(e);
    if (e.at("ph") == "M" && e.at("name") == "thread_name") threads.push_back(e);
  }
  REQUIRE(complete.size() == 3);
  CHECK(threads.size() == 2);
  CHECK(complete[0].at("ts").get<double>() == Approx(0));
  CHECK(complete[1].at("ts").get<double>() == Approx(1));  // 1,000 ns after the first
  CHECK(complete[1].at("dur").get<double>() == Approx(200));
  CHECK(complete[1].at("args").at("input_shapes") == "[[16], [1, 8]]");
  CHECK(complete[0].at("args").at("model_id") == "m");
  CHECK(complete[2].at("tid") == 2);
  CHECK(complete[2].at("pid") == 42);
  CHECK(trace.at("otherData").at("method_calls") == 10);
}
