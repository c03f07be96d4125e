// What the code/ records of a TorchScript archive declare, read as text.
//
// PythonPrint (torch/csrc/jit/serialization/python_print.cpp) writes one file
// per Python module, code/__torch__/a/b.py for classes __torch__.a.b.<Name>:
//   class Linear(Module):
//     __parameters__ = ["weight", "bias", ]
//     __buffers__ = []
//     weight : Tensor
//     in_features : Final[int] = 4
//     def forward(self: __torch__.a.b.Linear,
//       input: Tensor) -> Tensor:
//       ...
// Top-level `def`s are free functions. We read declarations only: class
// headers, the two lists, attribute annotations and `def` signatures (which
// may span lines until the closing "):" at bracket depth 0).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tsarchive {

struct CodeParameter {
  std::string name;
  std::string type;           // "" when unannotated
  std::string default_value;  // "" when none
};

struct CodeMethod {
  std::string name;
  std::vector<CodeParameter> parameters;  // without `self`
  std::string return_type;
  // "forward(x: Tensor, n: int=2) -> Tensor"
  std::string signature() const;
};

struct CodeAttribute {
  std::string name;
  std::string type;
};

struct CodeClass {
  std::string qualified_name;  // "__torch__.torch.nn.modules.linear.Linear"
  std::string base;            // "Module", "NamedTuple", "" ...
  std::string record;          // "code/__torch__/torch/nn/modules/linear.py"
  std::vector<std::string> parameters;
  std::vector<std::string> buffers;
  // Whether the class body has the `__parameters__` / `__buffers__` lines
  // (PythonPrint writes both for every Module, even when empty), and the
  // names of other unannotated class-level assignments besides
  // `__annotations__[...]`: libtorch 1.13 crashes importing such a Module.
  bool declares_parameters = false;
  bool declares_buffers = false;
  std::vector<std::string> other_assignments;
  std::vector<CodeAttribute> attributes;
  std::vector<CodeMethod> methods;
  size_t first_line = 0;  // 0-based, [first_line, end_line) of the class in its record
  size_t end_line = 0;
};

struct CodeFile {
  std::string record;
  std::string module_name;  // "__torch__.torch.nn.modules.linear"
  std::vector<CodeClass> classes;
  std::vector<CodeMethod> functions;
};

// "code/__torch__/a/b.py" -> "__torch__.a.b"
std::string code_module_name(std::string_view record);

// Parses the declarations of one code/ record. Never throws on odd text: lines
// it does not understand are skipped.
CodeFile parse_torchscript_code(std::string_view source, const std::string& record);

// Every dotted name (of two parts or more, or the bare `torch` or `ops`) the
// code uses ("torch.ops.myns.op", "self.weight"), as
// TorchScript's lexer reads it, not as the printer spells it: spaces, line
// continuations and comments between the parts do not count, string literals
// and comments are skipped, and getattr(x, "name") with a literal name (which
// TorchScript resolves when it compiles) is x.name. Hand-edited code/ records
// are compiled by torch.jit.load like printed ones, so a check of what code
// calls reads these, never the raw text.
std::vector<std::string> code_dotted_names(std::string_view source);

}  // namespace tsarchive
