#include <catch2/catch.hpp>

#include "tsarchive/torchscript_code.h"

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
