#include "contract/torch_message.h"

#include <optional>
#include <regex>
#include <vector>

namespace tsarchive {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos) lines.push_back(line.substr(first));
    begin = end + 1;
  }
  return lines;
}

std::string clip(std::string s, size_t n = 300) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

std::string match(const std::string& text, const std::regex& re, size_t group = 1) {
  std::smatch m;
  return std::regex_search(text, m, re) ? m.str(group) : std::string();
}

// What the condensing functions share: libtorch's message and how an Error
// is made from it (its kind, the file, the full message as detail).
struct Message {
  const std::string& raw;
  const std::string& file;
  std::vector<std::string> lines;
  std::string first;  // the first line, or "(no message)"

  Error make(std::string what, std::string hint) const {
    return Error(ErrorKind::Torch, clip(std::move(what)), file, std::move(hint)).with_detail(raw);
  }
};

// An operator or custom class that neither libtorch nor a loaded library has.
std::optional<Error> missing_operator(const Message& m, const std::string& libtorch) {
  // Unknown operator: at load (compiling code/) or for the lite interpreter.
  std::string op = match(m.raw, std::regex(R"(Unknown builtin op: ([A-Za-z0-9_.:]+?)\.?(\s|$))"));
  if (op.empty()) op = match(m.raw, std::regex(R"(Following ops cannot be found[^\[]*\[([^\]]+)\])"));
  if (op.empty()) op = match(m.raw, std::regex(R"(Unknown operator[^']*'?([A-Za-z0-9_]+::[A-Za-z0-9_.]+))"));
  // PyTorch's own namespaces: no library adds these, a newer PyTorch does.
  if (!op.empty() && !libtorch.empty() && (op.rfind("aten::", 0) == 0 || op.rfind("prim::", 0) == 0)) {
    const bool one_x = libtorch.rfind("1.", 0) == 0;
    return m.make("uses " + op + ", which libtorch " + libtorch + " lacks",
                one_x ? "use a tsarchive built against libtorch 2.x (scripts/dev.sh torch2; README: Choosing the libtorch)"
                      : "use a tsarchive built against a libtorch at least as new as the PyTorch that wrote the model "
                        "(README: Choosing the libtorch)");
  }
  if (!op.empty()) {
    return m.make("the model uses operator " + op + ", which no library loaded in this process registers",
                "load the library that defines it with --load-library LIB.so (a C++ extension built against this "
                "libtorch)");
  }

  // A custom class (torchbind) no loaded library registers.
  const std::string custom_class =
      match(m.raw, std::regex(R"(Unknown type name '(__torch__\.torch\.classes\.[A-Za-z0-9_.]+)')"));
  if (!custom_class.empty()) {
    return m.make("the model uses custom class " + custom_class + ", which no library loaded in this process registers",
                "load the library that defines it with --load-library LIB.so (a C++ extension built against this "
                "libtorch)");
  }

  return std::nullopt;
}

// Format and bytecode versions this libtorch does not read.
std::optional<Error> unreadable_version(const Message& m) {
  const std::string& first = m.first;
  // Format versions newer than this libtorch.
  const std::string version = match(m.raw, std::regex(R"(PyTorch file with version (\d+), but the maximum supported version for reading is (\d+))"));
  if (!version.empty()) {
    const std::string max = match(m.raw, std::regex(R"(maximum supported version for reading is (\d+))"));
    return m.make("written by a newer PyTorch: format version " + version + " is newer than this libtorch reads (at most " +
                    max + ")",
                "re-export it with the PyTorch release you deploy, or use a tsarchive built against a newer libtorch");
  }
  const std::string bytecode = match(m.raw, std::regex(R"(must be between (\d+) and (\d+) but the model version is (\d+))"), 3);
  if (!bytecode.empty()) {
    const std::string lo = match(m.raw, std::regex(R"(must be between (\d+) and (\d+))"), 1);
    const std::string hi = match(m.raw, std::regex(R"(must be between (\d+) and (\d+))"), 2);
    const bool newer = std::stoll(bytecode) > std::stoll(hi);
    return m.make(std::string(newer ? "written by a newer PyTorch: bytecode version " : "written by an old PyTorch: bytecode version ") +
                    bytecode + " is " + (newer ? "newer" : "older") + " than this libtorch reads (" + lo + "\u2013" + hi + ")",
                "re-export it with _save_for_lite_interpreter from the PyTorch release you deploy");
  }
  if (contains(m.raw, "greater than max supported model version") || contains(m.raw, "Lite Interpreter version number does not match") ||
      contains(m.raw, "bytecode version")) {
    return m.make("the lite-interpreter bytecode version is not one this libtorch runs: " + first,
                "re-export it with _save_for_lite_interpreter from the PyTorch release you deploy");
  }

  return std::nullopt;
}

// What went wrong while running: memory, kernels, devices, arguments.
std::optional<Error> runtime_problem(const Message& m, const std::string& doing) {
  const std::string& first = m.first;
  // optimize_for_mobile on a libtorch without XNNPACK (the CPU wheels of 2.x).
  if (contains(m.raw, "XNNPACK is not enabled")) {
    return m.make("this libtorch was built without XNNPACK, which --mobile (optimize_for_mobile) needs",
                "write the .ptl without --mobile (--lite or OUTPUT.ptl), or use a tsarchive built against a "
                "libtorch with XNNPACK (Debian's libtorch has it)");
  }

  // Out of memory, CPU or CUDA.
  if (contains(m.raw, "out of memory") || contains(m.raw, "can't allocate memory") || contains(m.raw, "bad_alloc")) {
    return m.make("out of memory while trying to " + doing + ": " + first,
                "use smaller --input shapes or --batch-sizes, fewer --threads, or another --device");
  }

  // A CUDA kernel asked of a CPU-only libtorch, or any missing kernel.
  const std::string backend_op = match(m.raw, std::regex(R"(Could not run '([^']+)' with arguments from the '([^']+)' backend)"));
  if (!backend_op.empty()) {
    const std::string backend = match(m.raw, std::regex(R"(from the '([^']+)' backend)"));
    if (backend.rfind("CUDA", 0) == 0 || backend.rfind("SparseCUDA", 0) == 0) {
      return m.make("this build's libtorch has no CUDA support (operator " + backend_op + ")",
                  "use --device cpu, or build tsarchive against a CUDA-enabled libtorch");
    }
    return m.make("operator " + backend_op + " has no kernel for the " + backend + " backend",
                "run on another --device, use inputs of another dtype, or --load-library a library that provides it");
  }

  if (contains(m.raw, "Expected all tensors to be on the same device")) {
    return m.make("the model mixes devices: " + first,
                "it keeps tensors on a fixed device (created inside forward or saved on one); run it with that --device");
  }

  // Arguments that do not fit the schema (we check first; this is a backstop).
  const std::string declaration = match(m.raw, std::regex(R"(Declaration: ([^\n]+))"));
  if (!declaration.empty()) {
    return m.make("the inputs do not fit the method: " + first, "it is declared as " + clip(declaration, 200));
  }

  return std::nullopt;
}

// An exception inside TorchScript code: the cause is the last line, the
// innermost location the last "File ..., line N" line.
std::optional<Error> interpreter_exception(const Message& m, const std::string& doing) {
  const std::vector<std::string>& lines = m.lines;
  const std::string& first = m.first;
  if (!contains(m.raw, "The following operation failed in the TorchScript interpreter") &&
      !contains(m.raw, "Traceback of TorchScript")) {
    return std::nullopt;
  }
  std::string cause = lines.empty() ? first : lines.back();
  if (cause.rfind("builtins.", 0) == 0) cause = cause.substr(9);
  // The archive's own code/ location (what 'tsarchive inspect --code'
  // shows), not the original source path on the exporter's machine.
  std::string where;
  for (const std::string& line : lines) {
    if (line.rfind("Traceback of TorchScript, original code", 0) == 0 && !where.empty()) break;
    if (line.rfind("File \"", 0) == 0) where = line;
  }
  const std::string file_name = match(where, std::regex(R"(File "([^"]+)\", line (\d+))"));
  const std::string line_no = match(where, std::regex(R"(File "[^"]+", line (\d+))"));
  std::string what = doing + " failed: " + cause;
  if (!file_name.empty()) what += " (at " + file_name + ":" + line_no + ")";
  // RuntimeError is libtorch's own (shapes, dtypes); any other exception
  // was raised by the model's code on these inputs.
  const bool raised_by_model = cause.rfind("RuntimeError", 0) != 0 && cause.find("Error: ") != std::string::npos;
  return m.make(what, raised_by_model ? "the model's code raised it on these inputs; --verbose shows the TorchScript "
                                      "traceback"
                                    : "check the --input shapes and dtypes against what the model expects; "
                                      "--verbose shows the TorchScript traceback");
}

}  // namespace

Error condense_torch_message(const std::string& raw, const std::string& file, const std::string& doing,
                             const std::string& libtorch) {
  Message m{raw, file, lines_of(raw), {}};
  m.first = m.lines.empty() ? std::string("(no message)") : m.lines.front();
  if (auto e = missing_operator(m, libtorch)) return *e;
  if (auto e = unreadable_version(m)) return *e;
  if (auto e = runtime_problem(m, doing)) return *e;
  if (auto e = interpreter_exception(m, doing)) return *e;
  return m.make("libtorch could not " + doing + ": " + m.first, "--verbose shows libtorch's full message");
}

}  // namespace tsarchive
