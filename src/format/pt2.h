// A PT2 archive (torch.export.save, torch._inductor.aoti_compile_and_package)
// read as data, without libtorch. PyTorch's "PT2 Archive Spec"
// (torch/export/pt2_archive/constants.py, docs/source/export/pt2_archive.md):
//   archive_format                  "pt2"
//   archive_version, .data/version, byteorder, .data/serialization_id
//   models/<model>.json             an ExportedProgram (torch/_export/serde/schema.py)
//   data/weights/<model>_weights_config.json    FQN -> {path_name, is_param, use_pickle, tensor_meta}
//   data/weights/weight_<n>         raw bytes of a parameter or buffer
//   data/constants/<model>_constants_config.json, data/constants/tensor_<n>, custom_obj_<n>
//   data/sample_inputs/<model>.pt   torch.save of (args, kwargs)
//   data/aotinductor/<model>/       compiled artifacts: *.so, *.cpp, *_metadata.json (AOTI_DEVICE_KEY, ...)
//   extra/                          user files (extra_files=)
// Every JSON record goes through parse_bounded_json; declared shapes are
// multiplied with overflow checks and compared with the records' sizes, never
// trusted to allocate or read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "format/archive.h"
#include "format/model.h"

namespace tsarchive {

// Size limits for the JSON records of a .pt2 (documented in the man page).
struct Pt2Limits {
  static constexpr uint64_t kProgramJson = 64ull << 20;  // models/<model>.json
  static constexpr uint64_t kConfigJson = 16ull << 20;   // weights and constants configs
  static constexpr uint64_t kMetadataJson = 1ull << 20;  // data/aotinductor/<model>/*_metadata.json
  static constexpr uint64_t kSampleInputs = 64ull << 20; // data/sample_inputs/<model>.pt, read to list its tensors
  static constexpr size_t kSymExpr = 64 * 1024;           // one expr_str, in bytes
  static constexpr int kSymExprDepth = 100;               // its nesting (calls, parentheses, operators)
  static constexpr size_t kJsonDepth = 1024;              // a JSON record's nesting: Python's json stops at ~1000
};

// An expr_str of a program (a SymInt's, SymFloat's or SymBool's as_expr)
// outside the grammar torch.export writes: torch.export.load hands every
// expr_str to sympy.sympify, which runs it through Python's eval.
struct Pt2SymExprProblem {
  std::string where;  // the JSON path in the record: "graph_module.graph.tensor_values.x.sizes[0].as_expr.expr_str"
  std::string expr;   // the text, cut at 200 bytes
  std::string why;    // "calls 'sympify', which is not a function torch.export writes"
};

// One dimension of a shape: a number, or a symbol ("s77") or expression.
struct Pt2Dim {
  std::optional<int64_t> value;
  std::string symbol;           // when not a number: the symbol or the expression, as text
  std::optional<int64_t> hint;  // the example's size, when the program records one
  std::string text() const { return value ? std::to_string(*value) : symbol; }
};

// TensorMeta of the serialized program.
struct Pt2Tensor {
  std::string dtype;  // "float32"; "scalar_type_<n>" when unknown
  std::vector<Pt2Dim> sizes;
  std::vector<Pt2Dim> strides;
  std::optional<int64_t> storage_offset;
  std::string device;  // "cpu", "cuda:0"
  bool requires_grad = false;
  std::optional<uint64_t> numel;   // when every size is a number
  std::optional<uint64_t> nbytes;  // bytes a storage needs for it (sizes, strides, offset), when static
};

// A graph input or output: what the signature says it is and its value.
struct Pt2Arg {
  std::string kind;    // input: user_input, parameter, buffer, tensor_constant, custom_obj, token, constant_input;
                       // output: user_output, buffer_mutation, user_input_mutation, loss_output, ...
  std::string name;    // the graph's name for it ("x", "p_fc1_weight")
  std::string target;  // parameter/buffer/constant FQN, or the mutated input
  std::optional<bool> persistent;  // buffers
  std::string value_type;          // tensor, sym_int, int, float, bool, none, string, custom_obj, token, ...
  std::string value_text;          // a constant's value, a custom object's class
  std::optional<Pt2Tensor> tensor;
};

struct Pt2Range {
  std::string symbol;
  std::optional<int64_t> min, max;  // nothing: unbounded
};

// One entry of a weights or constants config, and its record.
struct Pt2Payload {
  std::string name;    // FQN ("fc1.weight") or constant name
  std::string record;  // "data/weights/weight_0"
  bool is_param = false;
  bool use_pickle = false;
  std::optional<Pt2Tensor> tensor;
  bool present = false;  // the record exists
  uint64_t stored_size = 0;
  bool stored = false;   // not compressed
  bool aligned = false;  // data starts on a 64-byte boundary
};

struct Pt2Program {
  std::string name;    // <model> of models/<model>.json
  std::string record;
  std::optional<int64_t> schema_major, schema_minor;
  std::string torch_version;
  std::map<std::string, int64_t> opsets;
  std::vector<std::string> verifiers;
  std::vector<Pt2Arg> inputs;
  std::vector<Pt2Arg> outputs;
  std::vector<Pt2Range> ranges;
  uint64_t nodes = 0;
  std::map<std::string, uint64_t> operators;  // call targets and how often
  // Every target torch.export.load resolves by name (deserialize_operator)
  // and the graph then calls: the nodes' of the graph and of the graphs
  // inside it (a higher-order operator's branches and bodies), and operators
  // passed as arguments (as_operator).
  std::set<std::string> call_targets;
  std::vector<Pt2Payload> weights;            // from <model>_weights_config.json
  std::vector<Pt2Payload> constants;          // from <model>_constants_config.json
  std::string weights_config, constants_config;  // their records, empty when absent
  uint64_t sym_exprs = 0;                           // expr_str values read
  std::vector<Pt2SymExprProblem> unsafe_sym_exprs;  // those outside torch.export's grammar (the first 100)
  uint64_t guards = 0;                              // guards_code entries read
  std::vector<Pt2SymExprProblem> unsafe_guards;     // those outside the guards' grammar (the first 100)
  // Graph value names that are no Python identifier, parameter names FX
  // cannot write as attributes (pt2.cc collect_names): FX writes them into the
  // source it exec()s. `expr` is the name, `why` what it is not.
  std::vector<Pt2SymExprProblem> unsafe_names;
};

struct Pt2AotiFile {
  std::string name;  // below data/aotinductor/<model>/
  uint64_t size = 0;
};

struct Pt2AotiModel {
  std::string name;
  std::string device;  // AOTI_DEVICE_KEY: "cpu", "cuda", ...
  std::map<std::string, std::string> metadata;  // every AOTI_* key of the *_metadata.json records
  std::vector<Pt2AotiFile> files;
  uint64_t bytes = 0;
};

struct Pt2SampleInputs {
  std::string model;
  std::string record;
  uint64_t size = 0;
  std::vector<TensorInfo> tensors;  // paths as torch.save's pickle nests them: "0.0" is args[0]
  std::string problem;              // why the tensors could not be listed
};

struct Pt2Contents {
  std::string archive_format;   // "pt2"
  std::string archive_version;  // "0"
  std::vector<Pt2Program> programs;
  std::vector<Pt2AotiModel> aoti;
  std::vector<Pt2SampleInputs> sample_inputs;
  std::vector<std::string> notes;
  std::vector<std::string> problems;  // inconsistencies that do not stop the reading
};

// A program's graph as text pieces (inspect --graph), from models/<model>.json.
struct Pt2GraphNode {
  std::string target;                // "aten.linear.default" (without "torch.ops."), "_operator.getitem"
  bool torch_op = false;             // the target began with "torch.ops."
  std::vector<std::string> args;     // rendered: "%x", "dtype=float32", "[%a, %b]", "None"
  std::vector<std::string> inputs;   // the values it reads, by name, in order
  std::vector<std::string> outputs;  // the values it makes
};
struct Pt2Graph {
  std::string program, record;
  std::vector<std::string> inputs, outputs;   // value names, in order
  std::map<std::string, std::string> types;   // value name -> "float32[s77, 4]" (tensors), "sym_int"
  std::map<std::string, std::string> roles;   // input name -> "parameter fc1.weight", "user_input"
  std::vector<Pt2GraphNode> nodes;
};

// Limits of a rendered graph: a literal argument is cut at kLiteral bytes.
struct Pt2GraphLimits {
  static constexpr size_t kLiteral = 80;
};

// Reads the graph of models/<program>.json; an empty `program` is "model" or
// the only program there is. Error(BadInput) names the programs there are
// when it is not found, and the record and place when its JSON is malformed.
Pt2Graph read_pt2_graph(const TorchArchive& archive, const std::string& program);

// The program a record is, by name: "models/<program>.json" gives <program>
// (one path part), anything else nothing.
std::optional<std::string> pt2_program_of(const std::string& record);

// Reads a FileKind::ExportedProgram archive. Malformed JSON or structure is
// Error(BadInput) naming the record and where in it.
Pt2Contents read_pt2(const TorchArchive& archive);

// The parameters, buffers and tensor constants of every program as tensors
// (model.h), by name from the weights and constants configs: the FQN
// ("fc1.weight"), prefixed "<model>/" when the archive holds more than one
// program; role parameter, buffer or constant; storage_record the payload's
// record. Payloads that are pickled (use_pickle) or have a symbolic shape
// have no plain layout: they are left out and named in `problems`.
ModelContents pt2_tensors(const Pt2Contents& contents);

// The dtype name and element size of the serialized ScalarType `code`
// (torch/_export/serde/schema.py); false when unknown.
bool pt2_scalar_type(int64_t code, std::string* dtype, uint64_t* element_size);

// Why sympy.sympify(expr) would do more than build the expression torch.export
// wrote, or "" when `expr` is within its grammar (pt2.cc: sympy's srepr, as
// 2.13 writes it, and str(), as PyTorch before 2.5 wrote it).
std::string pt2_sym_expr_problem(std::string_view expr);

// Why exec() of `guard`, as ep.module() runs an ExportedProgram.guards_code
// entry, would do more than compare input sizes, or "" when it is within the
// grammar torch.export 2.13 writes (pt2.cc: ShapeGuardPythonPrinter's Python).
std::string pt2_guard_problem(std::string_view guard);

// Every expr_str of a program's JSON text (models/<model>.json, or the layout
// before 2.6's serialized_exported_program.json) outside that grammar;
// `sym_exprs` counts them all; `guards`, when given, gets the guards_code
// entries outside their grammar, `names` the names FX would write into code
// that it cannot (Pt2Program::unsafe_names). Error(BadInput) when it is not JSON.
std::vector<Pt2SymExprProblem> pt2_unsafe_sym_exprs(const std::string& program_json, uint64_t compressed_size,
                                                    const std::string& record, const std::string& path,
                                                    uint64_t* sym_exprs,
                                                    std::vector<Pt2SymExprProblem>* guards = nullptr,
                                                    std::vector<Pt2SymExprProblem>* names = nullptr);

// A symbolic size as Python's str() shows it: sympy's srepr, as torch.export
// 2.5 and later writes expr_str, printed as sympy does ("Add(FloorDiv(
// Symbol('s77', positive=True, integer=True), Integer(2)), Integer(1))" ->
// "(s77//2) + 1"); other text with each Symbol('name', ...) as its name.
std::string pt2_symbol_text(const std::string& expr);

}  // namespace tsarchive
