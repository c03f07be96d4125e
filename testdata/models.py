"""nn.Module definitions used by scripts/make_testdata.py.

TorchScript scripting needs the module source in a real file (it calls
inspect.getsource), so every module that gets scripted lives here rather than
inside the generator script.
"""

from typing import Tuple

import torch
from torch import Tensor, nn


class MLP(nn.Module):
    """encoder (Sequential: Linear, BatchNorm1d, ReLU) -> head (Linear).

    Gives module paths such as encoder.0.weight / encoder.1.running_mean,
    a plain registered buffer (`offset`) and an exported extra method.
    """

    def __init__(self, n_in: int = 8, n_hidden: int = 16, n_out: int = 3):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(n_in, n_hidden),
            nn.BatchNorm1d(n_hidden),
            nn.ReLU(),
        )
        self.head = nn.Linear(n_hidden, n_out)
        self.register_buffer("offset", torch.arange(n_out, dtype=torch.float32) * 0.5)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.encoder(x)) + self.offset

    @torch.jit.export
    def scaled(self, x: Tensor, scale: float = 2.0) -> Tensor:
        return self.forward(x) * scale


class ConvNet(nn.Module):
    """Small conv net, traced on a 1x3x16x16 input."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        x = self.pool(self.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


class DTypes(nn.Module):
    """Parameters and buffers covering many dtypes and layouts.

    - parameters: float64, float16, bfloat16 (and a float32 one)
    - buffers: int64, bool, uint8, int8, a 0-dim tensor,
      a non-contiguous (transposed view) buffer, and two buffers that are
      slice views of one shared base tensor (storage sharing).
    """

    def __init__(self):
        super().__init__()
        self.w_f64 = nn.Parameter(torch.randn(2, 3, dtype=torch.float64))
        self.w_f16 = nn.Parameter(torch.randn(4, dtype=torch.float16))
        self.w_bf16 = nn.Parameter(torch.randn(2, 2).to(torch.bfloat16))
        self.w_f32 = nn.Parameter(torch.randn(3))
        self.register_buffer("b_i64", torch.arange(5, dtype=torch.int64))
        self.register_buffer("b_bool", torch.tensor([True, False, True]))
        self.register_buffer("b_u8", torch.arange(250, 256, dtype=torch.int32).to(torch.uint8))
        self.register_buffer("b_i8", torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8))
        self.register_buffer("scalar", torch.tensor(3.5))
        base = torch.randn(3, 4)
        # Transposed view: shape [4, 3], stride [1, 4], not contiguous.
        self.register_buffer("transposed", base.t())
        shared = torch.arange(10, dtype=torch.float32)
        # Both share the storage of `shared`; the second has a storage offset.
        self.register_buffer("shared_a", shared[0:6])
        self.register_buffer("shared_b", shared[4:10])

    def forward(self, x: Tensor) -> Tensor:
        y = x * self.w_f64.sum().float() + self.w_f32.sum() + self.scalar
        y = y + self.w_f16.float().sum() + self.w_bf16.float().sum()
        y = y + self.b_i64.sum().float() + self.b_u8.float().sum() + self.b_i8.float().sum()
        y = y + self.transposed.sum() + self.shared_a.sum() + self.shared_b.sum()
        return torch.where(self.b_bool.any(), y, -y)


class QuantMLP(nn.Module):
    """Linear layers to be dynamically quantized with quantize_dynamic."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class QuantStatic(nn.Module):
    """Conv2d and Linear to be statically quantized with per-channel weights
    (torch.ao.quantization prepare/convert): each quantized weight keeps its
    scales and zero points in tensors of their own."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 5)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x: Tensor) -> Tensor:
        x = self.quant(x)
        x = torch.relu(self.conv(x))
        x = self.fc(x.reshape(x.shape[0], -1))
        return self.dequant(x)


class LinearBN(nn.Module):
    """Linear + BatchNorm1d, scripted in eval mode and then frozen."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.fc(x))


class TinyLinear(nn.Module):
    """Used for the ONNX export."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x)


class GRUNet(nn.Module):
    """nn.GRU followed by a Linear on the last time step."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(input_size=4, hidden_size=6, num_layers=1, batch_first=True)
        self.fc = nn.Linear(6, 2)

    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        out, h = self.gru(x)
        return self.fc(out[:, -1]), h


# --------------------------------------------------------------------------
# Models for `tsarchive run` (written by scripts/make_run_testdata.py into
# testdata/run/). Appended below the classes above so that their source
# lines, and so the archives make_testdata.py writes, do not change.
# --------------------------------------------------------------------------

from typing import Dict, List  # noqa: E402


class MultiIO(nn.Module):
    """Several argument kinds in, several result kinds out.

    forward(x, scale, opts, n=2) -> (x * scale,
                                     {k: v + (x * scale).sum() for k, v in opts},
                                     [x * scale + i for i in range(n)])
    Dict order is the order of `opts` (TorchScript dicts keep insertion order).
    """

    def forward(self, x: Tensor, scale: float, opts: Dict[str, Tensor],
                n: int = 2) -> Tuple[Tensor, Dict[str, Tensor], List[Tensor]]:
        y = x * scale
        total = y.sum()
        out: Dict[str, Tensor] = {}
        for k, v in opts.items():
            out[k] = v + total
        parts: List[Tensor] = []
        for i in range(n):
            parts.append(y + float(i))
        return y, out, parts


class NonFinite(nn.Module):
    """forward: log(x), NaN for negative x and -inf for 0; safe: always finite."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.log(x)

    @torch.jit.export
    def safe(self, x: Tensor) -> Tensor:
        return torch.log(x.abs() + 1.0)


class Raises(nn.Module):
    """Raises ValueError when x.sum() > 0, else returns x unchanged."""

    def forward(self, x: Tensor) -> Tensor:
        if bool(x.sum() > 0):
            raise ValueError("raises.pt: input sum is positive")
        return x


@torch.jit.script
class Box(object):
    """A TorchScript class: a tensor and an int."""

    def __init__(self, data: Tensor, count: int):
        self.data = data
        self.count = count


class Classy(nn.Module):
    """forward returns a TorchScript class object (Box), not a tensor."""

    def forward(self, x: Tensor) -> Box:
        return Box(x * 2.0, x.numel())


class Strings(nn.Module):
    """Non-tensor arguments and results:
    (label.upper() + "/" + str(len(flags)), sum(flags), float(x.sum()), x.numel() > 3)
    """

    def forward(self, x: Tensor, label: str,
                flags: List[int]) -> Tuple[str, int, float, bool]:
        total = 0
        for f in flags:
            total += f
        return (label.upper() + "/" + str(len(flags)), total,
                float(x.sum().item()), x.numel() > 3)
