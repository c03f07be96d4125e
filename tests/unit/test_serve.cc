// serve's HTTP parser and the Open Inference Protocol's JSON mapping
// (src/serve): requests as bytes, strict limits, tensors to and from JSON,
// batching's stacking.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>

#include "helpers.h"
#include "serve/arguments.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/v2.h"

using namespace tsarchive;
using namespace tsarchive::serve;

namespace {

template <class T>
std::vector<T> values_of(const HostTensor& t) {
  std::vector<T> out(t.bytes->size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.bytes->data(), out.size() * sizeof(T));  // no null pointer for none
  return out;
}

}  // namespace

TEST_CASE("http: a request with a body, fed a byte at a time, then a pipelined one") {
  HttpParser p;
  const std::string first = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  const std::string second = "GET /v2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const std::string all = first + second;
  HttpParser::State s = HttpParser::State::Incomplete;
  for (size_t i = 0; i < first.size(); ++i) {
    REQUIRE(s == HttpParser::State::Incomplete);
    s = p.feed(all.substr(i, 1));
  }
  REQUIRE(s == HttpParser::State::Complete);
  CHECK(p.request().method == "POST");
  CHECK(p.request().target == "/v2/models/m/infer");
  CHECK(p.request().body == "hello");
  CHECK(p.request().keep_alive);
  p.feed(second);
  REQUIRE(p.next() == HttpParser::State::Complete);
  CHECK(p.request().method == "GET");
  CHECK(p.request().body.empty());
  CHECK_FALSE(p.request().keep_alive);
}

TEST_CASE("http: strict parsing refuses with the right status") {
  const auto status_of = [](const std::string& bytes, HttpLimits limits = {}) {
    HttpParser p(limits);
    p.feed(bytes);
    return p.state() == HttpParser::State::Failed ? p.error_status() : 0;
  };
  CHECK(status_of("GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n") == 0);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n") == 411);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n") == 400);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n") == 400);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\n\r\n") == 411);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n") == 400);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n") == 400);
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n") == 400);
  HttpLimits small;
  small.max_body_bytes = 10;
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n", small) == 413);
  small.max_header_bytes = 64;
  CHECK(status_of("GET /x HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(100, 'a'), small) == 431);
  CHECK(status_of("GET /x HTTP/1.1\r\nX-Long: " + std::string(100, 'a') + "\r\n\r\n", small) == 431);
  CHECK(status_of("GET /x HTTP/1.1\r\n\r\n") == 400);            // no Host
  CHECK(status_of("GET /x HTTP/2.0\r\nHost: x\r\n\r\n") == 505);
  CHECK(status_of("GET  /x HTTP/1.1\r\nHost: x\r\n\r\n") == 400);
  CHECK(status_of("GET x HTTP/1.1\r\nHost: x\r\n\r\n") == 400);
  CHECK(status_of("GET /x HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n") == 400);
  CHECK(status_of("GET /x HTTP/1.1\r\nHost : x\r\n\r\n") == 400);
  CHECK(status_of("GET /x HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n") == 417);
  CHECK(status_of("G\x01T /x HTTP/1.1\r\nHost: x\r\n\r\n") == 400);
  // A bare LF is refused as soon as it is seen, not left waiting for a CRLF CRLF.
  CHECK(status_of("GET /x HTTP/1.1\nHost: x\n\n") == 400);
  CHECK(status_of("GET /x HTTP/1.1\n") == 400);
  CHECK(status_of("GET /x HTTP/1.1\r\nHost: x\n") == 400);
  CHECK(status_of("\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n") == 400);
  // ... in the head only: a body may hold any byte.
  CHECK(status_of("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na\nb") == 0);
}

TEST_CASE("http: HTTP/1.0 closes unless asked, Expect: 100-continue is seen") {
  HttpParser p;
  p.feed("GET / HTTP/1.0\r\n\r\n");
  REQUIRE(p.state() == HttpParser::State::Complete);
  CHECK_FALSE(p.request().keep_alive);
  HttpParser q;
  q.feed("POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  CHECK(q.awaiting_body());
  CHECK(q.request().expects_continue);
  CHECK(q.feed("abcd") == HttpParser::State::Complete);
}

TEST_CASE("http: responses carry their length and a JSON error body") {
  const std::string wire = render_response(json_error(404, "no \"m\""), false);
  CHECK(wire.rfind("HTTP/1.1 404 Not Found\r\n", 0) == 0);
  CHECK(wire.find("Connection: close\r\n") != std::string::npos);
  const std::string body = R"({"error":"no \"m\""})";
  CHECK(wire.find("Content-Length: " + std::to_string(body.size()) + "\r\n") != std::string::npos);
  CHECK(wire.substr(wire.size() - body.size()) == body);
}

TEST_CASE("v2: an infer request becomes tensors of the right dtype and bytes") {
  const InferRequest r = parse_infer_request(R"({"id": "7", "inputs": [
      {"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2.5], [3, -4]]},
      {"name": "n", "shape": [3], "datatype": "INT64", "data": [1, -2, 9007199254740993]},
      {"name": "b", "shape": [], "datatype": "BOOL", "data": [true]},
      {"name": "h", "shape": [2], "datatype": "FP16", "data": [1.0, -65504]},
      {"name": "u", "shape": [1], "datatype": "UINT8", "data": [255]}],
    "outputs": [{"name": "out"}]})");
  CHECK(r.id == "7");
  REQUIRE(r.inputs.size() == 5);
  CHECK(r.inputs[0].tensor.dtype == "float32");
  CHECK(r.inputs[0].tensor.stride == std::vector<int64_t>{2, 1});
  CHECK(values_of<float>(r.inputs[0].tensor) == std::vector<float>{1, 2.5f, 3, -4});
  CHECK(values_of<int64_t>(r.inputs[1].tensor) == std::vector<int64_t>{1, -2, 9007199254740993});
  CHECK(values_of<uint8_t>(r.inputs[2].tensor) == std::vector<uint8_t>{1});
  CHECK(values_of<uint16_t>(r.inputs[3].tensor) == std::vector<uint16_t>{0x3c00, 0xfbff});
  CHECK(values_of<uint8_t>(r.inputs[4].tensor) == std::vector<uint8_t>{255});
  CHECK(r.outputs == std::vector<std::string>{"out"});
}

TEST_CASE("v2: bad requests are 400 with a reason") {
  const auto message_of = [](const std::string& body) -> std::string {
    try {
      parse_infer_request(body);
    } catch (const ApiError& e) {
      CHECK(e.status() == 400);
      return e.what();
    }
    return "accepted";
  };
  CHECK(message_of("{") == "the request body is not valid JSON");
  CHECK(message_of("[]") == "the request body is not a JSON object");
  CHECK(message_of(R"({"inputs": {}})") == "the request has no \"inputs\" array");
  CHECK(message_of(R"({"outputs": []})") == "the request has no \"inputs\" array");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1]}]})") ==
        "input 'x': shape [2] needs 2 values, but 1 were given");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1, 2]}]})") ==
        "input 'x': shape [1] needs 1 values, but more were given");
  // The shape's own count, though the request's parse stops counting at its body size (review 56b).
  CHECK(message_of(R"({"inputs":[{"name":"x","shape":[1,3,8,8],"datatype":"FP32","data":[0]}]})") ==
        "input 'x': shape [1, 3, 8, 8] needs 192 values, but 1 were given");
  CHECK(message_of(R"({"inputs":[{"name":"x","shape":[4294967296,4294967296,2],"datatype":"FP32","data":[0]}]})") ==
        "input 'x': shape [4294967296, 4294967296, 2] needs more than 18446744073709551615 values, but 1 were given");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [128]}]})") ==
        "input 'x': 128 is not a INT8 value");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [1.5]}]})") ==
        "input 'x': 1.5 is not a INT32 value");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "BOOL", "data": [1]}]})") ==
        "input 'x': 1 is not a BOOL value");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP16", "data": [70000]}]})") ==
        "input 'x': 70000 is not a FP16 value");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]})").find(
            "datatype BYTES holds one string here") != std::string::npos);
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": [1]}]})").find(
            "datatype BYTES holds one string here") != std::string::npos);
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]})") ==
        "input 'x': the shape holds something other than sizes >= 0");
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]})").find("has no \"data\"") !=
        std::string::npos);
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]},
                                  {"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]})") ==
        "input 'x' is given twice");
  // A huge shape with little data is refused without allocating for it.
  CHECK(message_of(R"({"inputs": [{"name": "x", "shape": [100000000000, 100000000000], "datatype": "FP32", "data": [1]}]})")
            .find("needs") != std::string::npos);
}

TEST_CASE("v2: nested data follows the shape level by level; flat data is any row-major list") {
  const auto values = [](const std::string& shape, const std::string& data) {
    const InferRequest r = parse_infer_request(R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": )" + shape +
                                               R"(, "data": )" + data + "}]}");
    return values_of<float>(r.inputs[0].tensor);
  };
  const auto message_of = [](const std::string& shape, const std::string& data) -> std::string {
    try {
      parse_infer_request(R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": )" + shape + R"(, "data": )" + data +
                          "}]}");
    } catch (const ApiError& e) {
      CHECK(e.status() == 400);
      return e.what();
    }
    return "accepted";
  };
  const std::vector<float> four{1, 2, 3, 4};
  CHECK(values("[1, 4]", "[1, 2, 3, 4]") == four);
  CHECK(values("[1, 4]", "[[1, 2, 3, 4]]") == four);
  CHECK(values("[2, 2]", "[[1, 2], [3, 4]]") == four);
  CHECK(values("[2, 1, 2]", "[[[1, 2]], [[3, 4]]]") == four);
  CHECK(values("[2, 0]", "[[], []]").empty());
  CHECK(values("[]", "[5]") == std::vector<float>{5});
  // Ragged, transposed, too deep, too shallow, or half flat: refused, not read in a row.
  CHECK(message_of("[1, 4]", "[[1], [2, 3, 4]]") ==
        "input 'x': nested \"data\" must follow shape [1, 4] (or be flat): an array at depth 0 holds 2 entries, not 1");
  CHECK(message_of("[1, 4]", "[[1], [2], [3], [4]]").find("holds 4 entries, not 1") != std::string::npos);
  CHECK(message_of("[2, 2]", "[[1, 2, 3], [4]]").find("an array at depth 1 holds 3 entries, not 2") != std::string::npos);
  CHECK(message_of("[1, 1]", "[[[1]]]").find("an array lies at depth 2, past its 2 dimensions") !=
        std::string::npos);
  CHECK(message_of("[2, 2, 1]", "[[1, 2], [3, 4]]").find("a value lies at depth 2, not 3") != std::string::npos);
  CHECK(message_of("[4]", "[1, [2], 3, 4]").find("an array lies at depth 1, past its 1 dimensions") != std::string::npos);
}

TEST_CASE("v2: the request's parameters are parsed once, in order, beside the rest") {
  const InferRequest r = parse_infer_request(
      R"({"parameters": {"z": 1, "binary_data_output": true, "a": {"y": 1, "b": 2}}, "inputs": [], "id": "p"})");
  CHECK(r.id == "p");
  CHECK(r.binary_data_output);
  CHECK(r.parameters.dump() == R"({"z":1,"binary_data_output":true,"a":{"y":1,"b":2}})");
  CHECK(parse_infer_request(R"({"inputs": []})").parameters.is_null());
  for (const char* body : {R"({"inputs": [], "parameters": null})", R"({"inputs": [], "parameters": [1]})"}) {
    CHECK_THROWS_WITH(parse_infer_request(body), "the request: \"parameters\" is not an object");
  }
  CHECK_THROWS_WITH(parse_infer_request(R"({"inputs": [], "parameters": {"binary_data_output": 1}})"),
                    "the request: parameter \"binary_data_output\" is not true or false");
}

TEST_CASE("v2: a request of many inputs is checked for repeated names in linear time") {
  // 80,000 inputs (5 MB): comparing each name with every earlier one took
  // minutes; a hash set takes well under a second (the bound is loose for a
  // Debug build under AddressSanitizer on a loaded machine).
  std::string body = R"({"inputs": [)";
  for (int i = 0; i < 80000; ++i) {
    body += R"({"name": "i)" + std::to_string(i) + R"(", "shape": [1], "datatype": "FP32", "data": [0]},)";
  }
  body += R"({"name": "i0", "shape": [1], "datatype": "FP32", "data": [0]}]})";
  const auto began = std::chrono::steady_clock::now();
  std::string message;
  try {
    parse_infer_request(body);
  } catch (const ApiError& e) {
    message = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  CHECK(message == "input 'i0' is given twice");
  CHECK(seconds < 40.0);
}

TEST_CASE("v2: outputs as JSON, and the outputs asked for") {
  const std::vector<NamedTensor> outputs = {{"out[0]", float_tensor({1, 2}, {0.5f, -1})},
                                            {"out[1]", float_tensor({}, {3})}};
  const auto all = nlohmann::json::parse(render_infer_response("m", "9", outputs, {}));
  CHECK(all["model_name"] == "m");
  CHECK(all["id"] == "9");
  REQUIRE(all["outputs"].size() == 2);
  CHECK(all["outputs"][0]["datatype"] == "FP32");
  CHECK(all["outputs"][0]["shape"] == nlohmann::json::array({1, 2}));
  CHECK(all["outputs"][0]["data"] == nlohmann::json::array({0.5, -1.0}));
  CHECK(all["outputs"][1]["shape"] == nlohmann::json::array());
  const auto one = nlohmann::json::parse(render_infer_response("m", "", outputs, {"out[1]"}));
  CHECK_FALSE(one.contains("id"));
  REQUIRE(one["outputs"].size() == 1);
  CHECK(one["outputs"][0]["name"] == "out[1]");
  CHECK_THROWS_AS(render_infer_response("m", "", outputs, {"nope"}), ApiError);
}

TEST_CASE("v2: a response naming every one of many outputs is rendered in linear time") {
  // 200,000 outputs, each asked for by name and as binary: looking each name
  // up among all the others is 4e10 comparisons (hours; the test's CTest
  // timeout); hash sets take a fraction of a second. No clock is read here.
  std::vector<NamedTensor> outputs;
  std::vector<std::string> names;
  for (int i = 0; i < 200000; ++i) {
    names.push_back("out[2][" + std::to_string(i) + "]");
    outputs.push_back({names.back(), float_tensor({1}, {static_cast<float>(i)})});
  }
  const uint64_t bound = response_size_bound(outputs, names, false);
  size_t json_size = 0;
  const std::string text = render_infer_response("m", "", outputs, names, names, false, &json_size);
  CHECK(json_size > 0);
  CHECK(text.size() <= bound);
  const auto head = nlohmann::json::parse(text.substr(0, json_size));
  REQUIRE(head["outputs"].size() == 200000);
  CHECK(head["outputs"][199999]["name"] == "out[2][199999]");
}

TEST_CASE("v2: every served datatype round-trips through JSON") {
  for (const char* v2 : {"BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP64"}) {
    const std::string body = std::string(R"({"inputs": [{"name": "x", "shape": [2], "datatype": ")") + v2 +
                             (std::string(v2) == "BOOL" ? R"(", "data": [true, false]}]})" : R"(", "data": [1, 2]}]})");
    const InferRequest r = parse_infer_request(body);
    const nlohmann::json back = tensor_json(NamedTensor{"x", r.inputs[0].tensor});
    CHECK(back["datatype"] == v2);
    CHECK(back["data"] == nlohmann::json::parse(body)["inputs"][0]["data"]);
  }
}

TEST_CASE("v2: outputs written into the text equal nlohmann's, and stop at the response limit") {
  // Every datatype, NaN and Inf (null), an output name that holds "data":[].
  std::vector<NamedTensor> outputs;
  for (const char* v2 : {"BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP64"}) {
    const std::string body = std::string(R"({"inputs": [{"name": "x", "shape": [3], "datatype": ")") + v2 +
                             (std::string(v2) == "BOOL" ? R"(", "data": [true, false, true]}]})" : R"(", "data": [1, -0, 3]}]})");
    outputs.push_back(NamedTensor{std::string(v2) + R"("data":[])", parse_infer_request(body).inputs[0].tensor});
  }
  outputs.push_back({"odd", float_tensor({2, 2}, {0.1f, std::nanf(""), 1e30f * 1e30f, -3.25f})});
  nlohmann::json dom = {{"model_name", "m"}, {"id", "i"}, {"outputs", nlohmann::json::array()}};
  for (const NamedTensor& out : outputs) dom["outputs"].push_back(tensor_json(out));
  const std::string text = render_infer_response("m", "i", outputs, {});
  CHECK(text == dom.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  CHECK(text.size() <= response_size_bound(outputs, {}, false));
  CHECK(render_infer_response("m", "i", outputs, {}, {}, false, nullptr, text.size()) == text);

  // One byte less: 500 naming --max-response; binary outputs count too.
  try {
    render_infer_response("m", "i", outputs, {}, {}, false, nullptr, text.size() - 1);
    FAIL("a response over the limit was rendered");
  } catch (const ApiError& e) {
    CHECK(e.status() == 500);
    CHECK(std::string(e.what()).find("--max-response") != std::string::npos);
  }
  const std::vector<NamedTensor> big = {{"out", float_tensor({1000}, std::vector<float>(1000, 0.125f))}};
  CHECK_THROWS_AS(render_infer_response("m", "", big, {}, {}, true, nullptr, 3999), ApiError);
  CHECK(render_infer_response("m", "", big, {}, {}, true, nullptr, 5000).size() < 5000);
  CHECK(response_size_bound(big, {}, true) >= 4000);
  CHECK(response_size_bound(big, {}, false) >= 1000 * 6);
}

TEST_CASE("v2: the cost of parsing a body is counted on its bytes") {
  // Ten values in one array: 48 bytes each at most, on top of the text.
  const std::string body = R"({"inputs": [{"name": "x", "shape": [10], "datatype": "FP32", "data": [0,0,0,0,0,0,0,0,0,0]}]})";
  const uint64_t cost = parse_cost(body);
  CHECK(cost >= 48 * 10 + body.size());
  CHECK(cost < 48 * 30 + 96 * 5 + body.size());
  // Commas and brackets inside strings are not values; binary data counts once more.
  CHECK(parse_cost(R"({"a": "[,,,,[{"})") == parse_cost(R"({"a": "xxxxxxx"})"));
  CHECK(parse_cost(std::string("{}") + std::string(100, '\0'), 2) == parse_cost("{}") + 100);
}

TEST_CASE("http: the byte budget grants, refuses while others hold it, and refuses what can never fit") {
  ByteBudget budget(100);
  MemoryReservation a(&budget), b(&budget);
  CHECK(a.resize(60) == ByteBudget::Grant::Granted);
  CHECK(b.resize(50) == ByteBudget::Grant::Busy);  // 60 + 50 > 100: not now
  CHECK(b.bytes() == 0);
  CHECK(b.resize(101) == ByteBudget::Grant::TooLarge);  // never
  CHECK(b.resize(40) == ByteBudget::Grant::Granted);
  CHECK(budget.in_use() == 100);
  CHECK(a.resize(10) == ByteBudget::Grant::Granted);  // shrinking gives bytes back
  CHECK(b.resize(90) == ByteBudget::Grant::Granted);
  CHECK(budget.in_use() == 100);
  {
    MemoryReservation c(&budget);
    CHECK(c.resize(1) == ByteBudget::Grant::Busy);
  }
  b.release();
  a.release();
  CHECK(budget.in_use() == 0);
  MemoryReservation unlimited;
  CHECK(unlimited.resize(uint64_t{1} << 62) == ByteBudget::Grant::Granted);
}

TEST_CASE("batching: requests stack on dimension 0 and split back") {
  const std::vector<HostTensor> a = {float_tensor({1, 2}, {1, 2})};
  const std::vector<HostTensor> b = {float_tensor({2, 2}, {3, 4, 5, 6})};
  const std::vector<HostTensor> c = {float_tensor({1, 3}, {1, 2, 3})};
  CHECK(stackable(a, b));
  CHECK_FALSE(stackable(a, c));
  CHECK_FALSE(stackable(a, {float_tensor({}, {1})}));
  const std::vector<HostTensor> stacked = stack({&a, &b});
  REQUIRE(stacked.size() == 1);
  CHECK(stacked[0].shape == std::vector<int64_t>{3, 2});
  CHECK(values_of<float>(stacked[0]) == std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto split = unstack({NamedTensor{"out", stacked[0]}}, {1, 2});
  REQUIRE(split);
  CHECK(values_of<float>((*split)[0][0].tensor) == std::vector<float>{1, 2});
  CHECK((*split)[1][0].tensor.shape == std::vector<int64_t>{2, 2});
  CHECK(values_of<float>((*split)[1][0].tensor) == std::vector<float>{3, 4, 5, 6});
  // An output that is not one row per input row does not split.
  CHECK_FALSE(unstack({NamedTensor{"out", float_tensor({2}, {1, 2})}}, {1, 2}));
}

// --- /metrics ---------------------------------------------------------------------

TEST_CASE("metrics: counters, cumulative histograms and escaped labels in the exposition format") {
  ModelMetrics m;
  m.request(200, 0.003);
  m.request(200, 0.2);
  m.request(503, 0.0001);
  m.queued(0.002);
  m.computed(3, 0.004);
  m.computed(1, 0.001);
  m.restarted();
  ModelReport r;
  r.name = "a\"b\\c";
  r.counters = m.snapshot();
  r.queue_depth = 2;
  r.ready = true;
  const std::string text = render_metrics({r});
  const std::string label = "model=\"a\\\"b\\\\c\"";
  CHECK(text.find("# TYPE tsarchive_serve_requests_total counter\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_requests_total{" + label + ",status=\"200\"} 2\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_requests_total{" + label + ",status=\"503\"} 1\n") != std::string::npos);
  // 0.0001 and 0.003 at or below 0.005; 0.2 only from 0.25 on.
  CHECK(text.find("tsarchive_serve_request_seconds_bucket{" + label + ",le=\"0.005\"} 2\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_request_seconds_bucket{" + label + ",le=\"0.1\"} 2\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_request_seconds_bucket{" + label + ",le=\"0.25\"} 3\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_request_seconds_bucket{" + label + ",le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_request_seconds_count{" + label + "} 3\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_batch_size_bucket{" + label + ",le=\"2\"} 1\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_batch_size_bucket{" + label + ",le=\"4\"} 2\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_batch_size_sum{" + label + "} 4\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_queue_depth{" + label + "} 2\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_worker_restarts_total{" + label + "} 1\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_model_ready{" + label + "} 1\n") != std::string::npos);
  CHECK(text.find("operator") == std::string::npos);  // no --sample: no operator families
}

TEST_CASE("metrics: sampled operators summed over instances and scaled by the probability") {
  ModelReport r;
  r.name = "m";
  r.sample = 0.5;
  OperatorStats op;
  op.name = "aten::addmm";
  op.scope = "function";
  op.model_id = "m";
  op.calls = 3;
  op.total_ns = 2'000'000;
  op.self_ns = 1'000'000;
  r.operators = {op, op};  // two workers
  const std::string text = render_metrics({r});
  const std::string labels = "{model=\"m\",operator=\"aten::addmm\",scope=\"function\"}";
  CHECK(text.find("tsarchive_serve_operator_sampled_calls_total" + labels + " 6\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_operator_calls_total" + labels + " 12\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_operator_seconds_total" + labels + " 0.008\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_operator_self_seconds_total" + labels + " 0.004\n") != std::string::npos);
  CHECK(text.find("tsarchive_serve_operator_sample_probability{model=\"m\"} 0.5\n") != std::string::npos);
}

TEST_CASE("metadata: recorded shapes with -1 for the batch dimension") {
  CHECK(recorded_shape("x: Tensor float32 [2, 8]") == std::make_pair(std::string("x"), std::vector<int64_t>{2, 8}));
  CHECK(recorded_shape("out[0]: Tensor int64 []") == std::make_pair(std::string("out[0]"), std::vector<int64_t>{}));
  CHECK(!recorded_shape("scale: float 2.5"));
  CHECK(!recorded_shape("x: Tensor float32 [2, -8]"));
  ServedModelInfo info;
  info.inputs = {ServedValue{"x", "Tensor", "float32", false}, ServedValue{"y", "Tensor", "float32", false}};
  info.outputs = {ServedValue{"out", "Tensor", "float32", false}};
  const nlohmann::json meta = model_metadata("m", info, {{"x", {2, 8}}, {"out", {2, 3}}});
  CHECK(meta["inputs"][0]["shape"] == nlohmann::json::array({-1, 8}));
  CHECK(meta["inputs"][1]["shape"] == nlohmann::json::array({-1}));  // not recorded
  CHECK(meta["outputs"][0]["shape"] == nlohmann::json::array({-1, 3}));
}

// --- non-tensor parameters -------------------------------------------------------------

namespace {

ServedModelInfo scaled_info() {
  ServedModelInfo info;
  info.inputs = {ServedValue{"x", "Tensor", "float32", false}, ServedValue{"scale", "float", "", false},
                 ServedValue{"flags", "List[int]", "", true}, ServedValue{"n", "Optional[int]", "", true}};
  return info;
}

std::string x_input() { return R"({"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]})"; }

std::vector<HostValue> arguments_of(const std::string& body) {
  InferRequest request = parse_infer_request(body);
  return method_arguments("m", scaled_info(), request);
}

std::string arguments_refusal(const std::string& body) {
  try {
    arguments_of(body);
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("arguments: non-tensor parameters from the request's parameters and from inputs") {
  // scale as JSON beside the protocol's own key; flags as an INT32 1-D input;
  // n left out (its default).
  std::vector<HostValue> args = arguments_of(
      "{\"inputs\": [" + x_input() + R"(, {"name": "flags", "datatype": "INT32", "shape": [3], "data": [4, -5, 6]}],
          "parameters": {"scale": 0.5, "binary_data_output": false, "triton_enable_empty_final_response": true}})");
  REQUIRE(args.size() == 3);
  CHECK(args[0].kind == HostValue::Kind::Tensor);
  CHECK(values_of<float>(args[0].tensor) == std::vector<float>{1, 2});
  CHECK(args[1].kind == HostValue::Kind::Float);
  CHECK(args[1].real == 0.5);
  CHECK(args[1].origin == "the request's parameter 'scale'");
  REQUIRE(args[2].kind == HostValue::Kind::List);
  REQUIRE(args[2].items.size() == 3);
  CHECK(args[2].items[1].kind == HostValue::Kind::Int);
  CHECK(args[2].items[1].integer == -5);
  CHECK(args[2].origin == "input 'flags'");

  // scale as one FP64 value of shape [], flags and n as JSON (null for the Optional).
  args = arguments_of("{\"inputs\": [" + x_input() + R"(, {"name": "scale", "datatype": "FP64", "shape": [], "data": [2.5]}],
          "parameters": {"flags": [1, 2], "n": null}})");
  REQUIRE(args.size() == 4);
  CHECK(args[1].kind == HostValue::Kind::Float);
  CHECK(args[1].real == 2.5);
  CHECK(args[2].kind == HostValue::Kind::List);
  CHECK(args[3].kind == HostValue::Kind::None);

  // A BYTES string is a string value (the schema in the worker decides
  // whether it fits); a Tensor parameter refuses it here.
  args = arguments_of("{\"inputs\": [" + x_input() + R"(, {"name": "scale", "datatype": "BYTES", "shape": [1], "data": ["s"]}]})");
  CHECK(args[1].kind == HostValue::Kind::String);
  CHECK(args[1].string == "s");
  CHECK(arguments_refusal(R"({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": ["s"]}]})")
            .find("'x' is a Tensor, which holds numbers") != std::string::npos);
}

TEST_CASE("arguments: a method whose parameters are all non-tensor takes an empty inputs array") {
  ServedModelInfo info;
  info.inputs = {ServedValue{"dictionary", "Dict[str, float]", "", false}};
  InferRequest request = parse_infer_request(R"({"inputs": [], "parameters": {"dictionary": {"b": 1.0, "a": 2.0}}})");
  const std::vector<HostValue> args = method_arguments("m", info, request);
  REQUIRE(args.size() == 1);
  CHECK(args[0].kind == HostValue::Kind::Dict);
  // A method that takes a tensor still says which input is missing.
  CHECK(arguments_refusal(R"({"inputs": [], "parameters": {"scale": 0.5}})") ==
        "input 'x' is missing; model 'm' takes x, scale (float), flags (List[int]), n (Optional[int])");
}

TEST_CASE("arguments: wrong or misplaced parameters are 400 naming them") {
  const std::string x = "{\"inputs\": [" + x_input() + "]";
  CHECK(arguments_refusal(x + "}") ==
        "parameter 'scale' is missing; model 'm' takes x, scale (float), flags (List[int]), n (Optional[int])");
  CHECK(arguments_refusal(x + R"(, "parameters": {"scale": 1, "scales": 2}})").find("has no parameter 'scales'") !=
        std::string::npos);
  CHECK(arguments_refusal(x + R"(, "parameters": {"scale": 1, "x": [1]}})").find("'x' is a Tensor") != std::string::npos);
  CHECK(arguments_refusal(x + R"(, "parameters": {"scale": 1, "n": 3}})").find("after one with a default that was left out") !=
        std::string::npos);
  CHECK(arguments_refusal(x + R"(, "parameters": {"scale": 18446744073709551615}})") ==
        "parameter 'scale' (float): bad json input: integer 18446744073709551615 does not fit in 64 bits (int64)");
  CHECK(arguments_refusal("{\"inputs\": [" + x_input() + R"(, {"name": "scale", "datatype": "FP64", "shape": [2], "data": [1, 2]}]})")
            .find("input 'scale' (float) takes one value (shape [] or [1])") != std::string::npos);
  CHECK(arguments_refusal("{\"inputs\": [" + x_input() + R"(, {"name": "scale", "datatype": "FP64", "shape": [1], "data": [1]}],
                   "parameters": {"scale": 1}})")
            .find("'scale' is given both") != std::string::npos);
  CHECK(arguments_refusal("{\"inputs\": [" + x_input() + R"(, {"name": "flags", "datatype": "INT64", "shape": [1, 1], "data": [1]}],
                   "parameters": {"scale": 1}})")
            .find("input 'flags' (List[int]) takes a 1-D tensor") != std::string::npos);
  CHECK(arguments_refusal("{\"inputs\": [" + x_input() + R"(, {"name": "scale", "datatype": "FP16", "shape": [1], "data": [1]}]})")
            .find("datatype FP16 cannot give a non-tensor value") != std::string::npos);
  // A parameter named as one of the protocol's keys comes only as an input.
  ServedModelInfo timed;
  timed.inputs = {ServedValue{"timeout", "int", "", false}};
  InferRequest protocol = parse_infer_request(R"({"inputs": [{"name": "timeout", "datatype": "INT64", "shape": [1], "data": [5]}]})");
  REQUIRE(method_arguments("m", timed, protocol)[0].integer == 5);
  protocol = parse_infer_request(R"({"inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [5]}]})");
  protocol.inputs.clear();
  protocol.parameters = nlohmann::ordered_json::parse(R"({"timeout": 5})");
  CHECK_THROWS_WITH(method_arguments("m", timed, protocol),
                    "parameter 'timeout' is missing; model 'm' takes timeout (int) ('timeout' in the request's "
                    "\"parameters\" is the protocol's: send it as an input)");
  // A spec string inside a value whose type holds tensors is bounded before any worker generates it.
  ServedModelInfo info;
  info.inputs = {ServedValue{"opts", "Dict[str, Tensor]", "", false}};
  InferRequest request = parse_infer_request(R"({"inputs": [{"name": "opts", "datatype": "FP32", "shape": [0], "data": []}]})");
  request.inputs.clear();
  request.parameters = nlohmann::ordered_json::parse(R"({"opts": {"a": "10000x10000", "b": "2x3"}})");
  try {
    method_arguments("m", info, request);
    FAIL("a 10000x10000 tensor spec was accepted");
  } catch (const ApiError& e) {
    CHECK(std::string(e.what()).find("past 16777216 elements in all") != std::string::npos);
  }
}

TEST_CASE("arguments: the tensors a request's spec strings make are bounded in all, and their bytes counted") {
  ServedModelInfo info;
  info.inputs = {ServedValue{"opts", "Dict[str, Tensor]", "", false}};
  const auto request_of = [](const std::string& opts) {
    InferRequest request;
    request.parameters = nlohmann::ordered_json::parse(R"({"opts": )" + opts + "}");
    return request;
  };
  // Each of these alone is within the bound; thirty of them would make 4 GiB in the worker.
  std::string many = "{";
  for (int i = 0; i < 30; ++i) many += (i > 0 ? ", " : "") + ("\"k" + std::to_string(i)) + "\": \"16777216:float64:zeros\"";
  many += "}";
  InferRequest refused = request_of(many);
  try {
    method_arguments("m", info, refused);
    FAIL("thirty specs of 2^24 elements each were accepted");
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    CHECK(std::string(e.what()).find("past 16777216 elements in all") != std::string::npos);
  }
  InferRequest accepted = request_of(R"({"a": "1024x1024:float64:zeros", "b": "2x3", "c": "not a spec"})");
  uint64_t spec_bytes = 0;
  method_arguments("m", info, accepted, &spec_bytes);
  CHECK(spec_bytes == 1024 * 1024 * 8 + 6 * 4);
}

TEST_CASE("arguments: requests whose values hold spec strings never batch, even when equal") {
  ServedModelInfo info;
  info.inputs = {ServedValue{"x", "Tensor", "float32", false}, ServedValue{"opts", "Dict[str, Tensor]", "", false}};
  const auto arguments = [&info](const std::string& opts) {
    InferRequest request = parse_infer_request("{\"inputs\": [" + x_input() + "], \"parameters\": {\"opts\": " + opts + "}}");
    return method_arguments("m", info, request);
  };
  // The worker would make one 2x3 tensor for the whole batch, and its rows be
  // split among the requests as if each had sent its own.
  CHECK(!same_non_tensors(arguments(R"({"a": "2x3:float32:zeros"})"), arguments(R"({"a": "2x3:float32:zeros"})")));
  CHECK(same_non_tensors(arguments(R"({})"), arguments(R"({})")));
}

TEST_CASE("arguments: requests batch only with equal non-tensor values") {
  const auto with = [](const std::string& parameters) {
    return arguments_of("{\"inputs\": [" + x_input() + "], \"parameters\": " + parameters + "}");
  };
  const std::vector<HostValue> a = with(R"({"scale": 0.5, "flags": [1, 2]})");
  CHECK(same_non_tensors(a, with(R"({"scale": 0.5, "flags": [1, 2]})")));
  CHECK(!same_non_tensors(a, with(R"({"scale": 0.25, "flags": [1, 2]})")));
  CHECK(!same_non_tensors(a, with(R"({"scale": 0.5, "flags": [1, 3]})")));
  CHECK(!same_non_tensors(a, with(R"({"scale": 0.5})")));
  CHECK(!same_non_tensors(a, with(R"({"scale": 1, "flags": [1, 2]})")));  // an int is not the float 1.0
  REQUIRE(tensors_of(a).size() == 1);
  const std::vector<HostValue> b = with_tensors(a, {float_tensor({2, 2}, {1, 2, 3, 4})});
  CHECK(b[0].tensor.shape == std::vector<int64_t>{2, 2});
  CHECK(b[1].real == 0.5);
  CHECK(b[2].items.size() == 2);
}

TEST_CASE("metadata: non-tensor inputs an input can give have a datatype, others their TorchScript type") {
  ServedModelInfo info = scaled_info();
  info.inputs.push_back(ServedValue{"flag", "bool", "", true});
  info.inputs.push_back(ServedValue{"label", "str", "", true});
  info.inputs.push_back(ServedValue{"labels", "List[str]", "", true});
  info.outputs = {ServedValue{"out", "int", "", false}};
  const nlohmann::json meta = model_metadata("m", info);
  const auto entry = [](const std::string& datatype, std::vector<int64_t> shape) {
    return std::make_pair(datatype, nlohmann::json(shape));
  };
  const auto of = [&](const nlohmann::json& v) { return std::make_pair(v["datatype"].get<std::string>(), v["shape"]); };
  CHECK(of(meta["inputs"][1]) == entry("FP64", {1}));
  CHECK(of(meta["inputs"][2]) == entry("INT64", {-1}));
  CHECK(of(meta["inputs"][3]) == entry("INT64", {1}));
  CHECK(of(meta["inputs"][4]) == entry("BOOL", {1}));
  CHECK(of(meta["inputs"][5]) == entry("BYTES", {1}));
  CHECK(of(meta["inputs"][6]) == entry("List[str]", {-1}));
  CHECK(of(meta["outputs"][0]) == entry("INT64", {-1}));  // a 0-d tensor: its shape is not [1]
}

// --- the binary tensor data extension -----------------------------------------------

TEST_CASE("v2: binary inputs after the JSON header, binary outputs after the JSON answer") {
  const std::vector<float> x = {1.5f, -2.0f, 3.25f, 4.0f};
  const std::vector<int64_t> ids = {7, -9};
  const std::string header_json = R"({"inputs": [
      {"name": "x", "shape": [2, 2], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
      {"name": "ids", "shape": [2], "datatype": "INT64", "data": [7, -9]}],
    "outputs": [{"name": "out", "parameters": {"binary_data": true}}, {"name": "n"}]})";
  const std::string body = header_json + std::string(reinterpret_cast<const char*>(x.data()), 16);
  const InferRequest r = parse_infer_request(body, header_json.size());
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].tensor.shape == std::vector<int64_t>{2, 2});
  CHECK(values_of<float>(r.inputs[0].tensor) == x);
  CHECK(values_of<int64_t>(r.inputs[1].tensor) == ids);
  CHECK(r.binary_outputs == std::vector<std::string>{"out"});

  // Sizes that do not add up, bytes nobody claims, a header past the body,
  // binary_data_size without the header, BYTES.
  CHECK_THROWS_AS(parse_infer_request(body.substr(0, body.size() - 1), header_json.size()), ApiError);
  CHECK_THROWS_AS(parse_infer_request(body + "x", header_json.size()), ApiError);
  CHECK_THROWS_AS(parse_infer_request(body, body.size() + 1), ApiError);
  CHECK_THROWS_AS(parse_infer_request(header_json), ApiError);
  try {
    parse_infer_request(R"({"inputs": [{"name": "s", "shape": [1, 2], "datatype": "BYTES", "data": [["a", "b"]]}]})");
    FAIL("two BYTES strings were accepted");
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    CHECK(std::string(e.what()).find("BYTES") != std::string::npos);
  }
  // One BYTES string, as JSON and as binary (4-byte length, then the bytes).
  CHECK(parse_infer_request(R"({"inputs": [{"name": "s", "shape": [1], "datatype": "BYTES", "data": ["héllo"]}]})")
            .inputs[0].text == std::string("héllo"));
  const std::string text_json = R"({"inputs": [{"name": "s", "shape": [], "datatype": "BYTES",
                                    "parameters": {"binary_data_size": 7}}]})";
  const InferRequest text = parse_infer_request(text_json + std::string("\3\0\0\0abc", 7), text_json.size());
  CHECK(text.inputs[0].text == std::string("abc"));
  CHECK_THROWS_AS(parse_infer_request(text_json + std::string("\4\0\0\0abc", 7), text_json.size()), ApiError);

  const std::vector<NamedTensor> outputs = {NamedTensor{"out", float_tensor({2, 2}, x)},
                                            NamedTensor{"n", float_tensor({1}, {5.0f})}};
  size_t header = 0;
  const std::string answer = render_infer_response("m", "", outputs, {}, {"out"}, false, &header);
  REQUIRE(header > 0);
  REQUIRE(answer.size() == header + 16);
  const auto doc = nlohmann::json::parse(answer.substr(0, header));
  CHECK(doc["outputs"][0]["parameters"]["binary_data_size"] == 16);
  CHECK(!doc["outputs"][0].contains("data"));
  CHECK(doc["outputs"][1]["data"] == nlohmann::json::array({5.0}));
  CHECK(answer.substr(header) == std::string(reinterpret_cast<const char*>(x.data()), 16));
  // No binary output asked for: JSON only, no header.
  render_infer_response("m", "", outputs, {}, {}, false, &header);
  CHECK(header == 0);
  // binary_data_output: every output.
  const std::string all = render_infer_response("m", "", outputs, {}, {}, true, &header);
  CHECK(all.size() == header + 20);
}
