"""The next release of models.MLP, for the `tsarchive diff` test data.

scripts/make_testdata.py imports this file as `models` in a fresh interpreter,
so TorchScript names the class __torch__.models.MLP exactly as in
testdata/models.py, and code/__torch__/models.py of the two archives can be
compared line by line. The changes are the ones a developer makes between two
releases of a model:

- scaled() clamps its result (a changed method body);
- a new exported method, predict(), and the buffer it reads, `temperature`.

Everything else (architecture, forward, parameter initialisation order) is as
in testdata/models.py, so with the same seed the weights start out equal.
"""

import torch
from torch import Tensor, nn


class MLP(nn.Module):
    """encoder (Sequential: Linear, BatchNorm1d, ReLU) -> head (Linear)."""

    def __init__(self, n_in: int = 8, n_hidden: int = 16, n_out: int = 3):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(n_in, n_hidden),
            nn.BatchNorm1d(n_hidden),
            nn.ReLU(),
        )
        self.head = nn.Linear(n_hidden, n_out)
        self.register_buffer("offset", torch.arange(n_out, dtype=torch.float32) * 0.5)
        self.register_buffer("temperature", torch.tensor(1.5))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.encoder(x)) + self.offset

    @torch.jit.export
    def scaled(self, x: Tensor, scale: float = 2.0) -> Tensor:
        return torch.clamp(self.forward(x) * scale, -10.0, 10.0)

    @torch.jit.export
    def predict(self, x: Tensor) -> Tensor:
        return torch.softmax(self.forward(x) / self.temperature, dim=1)
