# Real PyTorch 2.13 exports with guards_code (Dim.AUTO, derived dims, unbacked .item(), nested inputs)
# and nan/inf float constants: testdata/pt2/guards_*.pt2, and parameter, buffer and input names that are
# Python identifiers but not ASCII (testdata/pt2/unicode_names.pt2), which load safety must pass.
# Run with PyTorch 2.13: python scripts/make_testdata_pt2_guards.py [OUT [NAME...]]
import torch, json, zipfile, sys
from torch.export import Dim
out = sys.argv[1] if len(sys.argv) > 1 else __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "testdata", "pt2")
class A(torch.nn.Module):
    def forward(self, x, y):
        if x.shape[0] > 4:
            return x[: x.shape[0] // 2] * 2 + y.sum()
        return x
class B(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y]) * float('nan') + float('inf')
class C(torch.nn.Module):
    def forward(self, x):
        n = x.sum().int().item()
        torch._check(n >= 0); torch._check(n <= 100)
        return torch.zeros(n) + x.shape[0]
class D(torch.nn.Module):
    def forward(self, x, d):
        return x.reshape(-1) * d["k"].sum() + x.new_full((1,), float('-inf'))
class E(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.线性 = torch.nn.Linear(3, 2)
        self.register_buffer("échelle", torch.full((2,), 0.5))
    def forward(self, 输入, café):
        return self.线性(输入) * self.échelle + café
b = Dim("b", min=3, max=64)
cases = {
 "guards_dim": (A(), (torch.randn(8, 3), torch.randn(8)), {"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}}),
 "guards_derived": (B(), (torch.randn(8, 3), torch.randn(9, 3)), {"x": {0: b}, "y": {0: b + 1}}),
 "guards_unbacked": (C(), (torch.tensor([3.0, 4.0]),), {"x": {0: Dim.AUTO}}),
 "guards_nested": (D(), (torch.randn(4, 6), {"k": torch.randn(5)}), {"x": {0: Dim("r", max=100), 1: Dim.AUTO}, "d": {"k": {0: Dim.DYNAMIC}}}),
 "unicode_names": (E(), (torch.randn(4, 3), torch.randn(4, 2)), {"输入": {0: Dim.AUTO}, "café": {0: Dim.AUTO}}),
}
only = set(sys.argv[2:])
for name, (m, args, ds) in cases.items():
    if only and name not in only:
        continue
    ep = torch.export.export(m, args, dynamic_shapes=ds)
    torch.export.save(ep, f"{out}/{name}.pt2")
    with zipfile.ZipFile(f"{out}/{name}.pt2") as z:
        j = json.loads(z.read([n for n in z.namelist() if n.endswith("models/model.json")][0]))
    print(name, j.get("guards_code"))
    ep2 = torch.export.load(f"{out}/{name}.pt2"); ep2.module()(*args)
