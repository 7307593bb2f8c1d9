"""Models the DAP tests compile (a factory module each, as `nac compile model.py` takes)."""

NESTED = '''import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, h):
        return torch.softmax(self.proj(h), -1)  # @softmax


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = Head()

    def forward(self, x):
        h = torch.relu(self.body(x))  # @body
        y = self.head(h)  # @head-call
        return torch.log(y - 0.3)  # @log: softmax values under 0.3 make NaN here


def make_model():
    torch.manual_seed(0)
    return Net(), (torch.randn(2, 6),)
'''

# 300 matrix products of 1024x1024 (2 GFLOP each, 640 GFLOP in all): seconds even on a fast
# many-core machine, so a test can pause it half a second in; nothing runs it to the end
SLOW = '''import torch


class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(1024, 1024) / 40)

    def forward(self, x):
        for _ in range(300):
            x = torch.tanh(x @ self.w)
        return x


def make_model():
    torch.manual_seed(0)
    return Slow(), (torch.randn(1024, 1024),)
'''


def marker_line(source: str, marker: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if f"# @{marker}" in line)
