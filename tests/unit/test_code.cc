#include <catch2/catch.hpp>

#include "format/torchscript_code.h"

using namespace tsarchive;

namespace {
const char* kSource = R"(class Linear(Module):
  __parameters__ = ["weight", "bias", ]
  __buffers__ = []
  weight : Tensor
  bias : Tensor
  training : bool
  in_features : Final[int] = 4
  def forward(self: __torch__.torch.nn.modules.linear.Linear,
    input: Tensor) -> Tensor:
    weight = self.weight
    return torch.linear(input, weight, self.bias)
  def pick(self: __torch__.torch.nn.modules.linear.Linear,
    xs: List[Tuple[int, str]],
    d: Dict[str, Tensor]={},
    s: str="a, b") -> Optional[Tensor]:
    return None
class Other(Module):
  __parameters__ = []
  __buffers__ = ["running_mean", ]
def helper(x: int) -> int:
  return x
)";
}

TEST_CASE("code: classes, parameter and buffer lists, attributes") {
  const CodeFile f = parse_torchscript_code(kSource, "code/__torch__/torch/nn/modules/linear.py");
  CHECK(f.module_name == "__torch__.torch.nn.modules.linear");
  REQUIRE(f.classes.size() == 2);
  const CodeClass& c = f.classes[0];
  CHECK(c.qualified_name == "__torch__.torch.nn.modules.linear.Linear");
  CHECK(c.base == "Module");
  CHECK(c.parameters == std::vector<std::string>{"weight", "bias"});
  CHECK(c.buffers.empty());
  REQUIRE(c.attributes.size() == 4);
  CHECK(c.attributes[3].name == "in_features");
  CHECK(c.attributes[3].type == "Final[int]");
  CHECK(f.classes[1].buffers == std::vector<std::string>{"running_mean"});
  CHECK(c.first_line == 0);
  CHECK(c.end_line == 16);
}

TEST_CASE("code: multi-line signatures with nested types and defaults") {
  const CodeFile f = parse_torchscript_code(kSource, "code/__torch__/torch/nn/modules/linear.py");
  const CodeClass& c = f.classes[0];
  REQUIRE(c.methods.size() == 2);
  CHECK(c.methods[0].signature() == "forward(input: Tensor) -> Tensor");
  const CodeMethod& pick = c.methods[1];
  REQUIRE(pick.parameters.size() == 3);
  CHECK(pick.parameters[0].type == "List[Tuple[int, str]]");
  CHECK(pick.parameters[1].default_value == "{}");
  CHECK(pick.parameters[2].default_value == "\"a, b\"");
  CHECK(pick.return_type == "Optional[Tensor]");
  REQUIRE(f.functions.size() == 1);
  CHECK(f.functions[0].signature() == "helper(x: int) -> int");
}

TEST_CASE("code: odd text is skipped, never fatal") {
  const CodeFile f = parse_torchscript_code("def (\nclass\n  __parameters__ = [\n\x01\x02", "code/x.py");
  CHECK(f.classes.size() <= 1);
}

TEST_CASE("code: a Module without its __parameters__ or __buffers__ line is told apart from empty lists") {
  // testdata/hostile/renamed_*.pt: libtorch 1.13 SEGFAULTs importing these.
  const CodeFile f = parse_torchscript_code(R"(class A(Module):
  __paramXters__ = ["weight", ]
  __buffers__ = []
  __annotations__["0"] = Tensor
  weight : Tensor
  n : Final[int] = 3
class B(Module):
  __parameters__ = []
  __bufferX__ = []
)",
                                            "code/__torch__/m.py");
  REQUIRE(f.classes.size() == 2);
  CHECK_FALSE(f.classes[0].declares_parameters);
  CHECK(f.classes[0].declares_buffers);
  CHECK(f.classes[0].other_assignments == std::vector<std::string>{"__paramXters__"});
  CHECK(f.classes[1].declares_parameters);
  CHECK_FALSE(f.classes[1].declares_buffers);
  CHECK(f.classes[1].other_assignments == std::vector<std::string>{"__bufferX__"});
  const CodeFile ok = parse_torchscript_code(kSource, "code/__torch__/torch/nn/modules/linear.py");
  for (const CodeClass& c : ok.classes) {
    CHECK(c.declares_parameters);
    CHECK(c.declares_buffers);
    CHECK(c.other_assignments.empty());
  }
}
