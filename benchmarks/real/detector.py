"""Detector family: a YOLOv8n-style detector (Conv+BN+SiLU, C2f blocks, SPPF, upsample + concat neck,
decoupled heads), 320x320."""

from __future__ import annotations

from benchmarks.real.common import TorchSpec, images


def yolo():
    import torch
    from torch import nn

    class Conv(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1):
            super().__init__()
            self.conv, self.bn, self.act = nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c: int, shortcut: bool):
            super().__init__()
            self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C2f(nn.Module):
        """Split in two, run n bottlenecks on one half, concat every intermediate, 1x1 conv."""

        def __init__(self, cin: int, cout: int, n: int, shortcut: bool = True):
            super().__init__()
            self.c = cout // 2
            self.cv1, self.cv2 = Conv(cin, 2 * self.c), Conv((2 + n) * self.c, cout)
            self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

        def forward(self, x):
            ys = list(self.cv1(x).chunk(2, 1))
            for m in self.m:
                ys.append(m(ys[-1]))
            return self.cv2(torch.cat(ys, 1))

    class SPPF(nn.Module):
        def __init__(self, cin: int, cout: int):
            super().__init__()
            self.cv1, self.cv2, self.pool = Conv(cin, cin // 2), Conv(cin * 2, cout), nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))

    class Detect(nn.Module):
        def __init__(self, chs: list[int], classes: int = 80, reg: int = 16):
            super().__init__()
            c2, c3 = max(16, chs[0] // 4, reg * 4), max(chs[0], min(classes, 100))
            self.box = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg, 1)) for c in chs)
            self.cls = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, classes, 1)) for c in chs)

        def forward(self, xs):
            outs = [torch.cat([b(x), c(x)], 1).flatten(2) for x, b, c in zip(xs, self.box, self.cls)]
            return torch.cat(outs, 2)

    class Yolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1))
            self.p3 = nn.Sequential(Conv(32, 64, 3, 2), C2f(64, 64, 2))
            self.p4 = nn.Sequential(Conv(64, 128, 3, 2), C2f(128, 128, 2))
            self.p5 = nn.Sequential(Conv(128, 256, 3, 2), C2f(256, 256, 1), SPPF(256, 256))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n4, self.n3 = C2f(384, 128, 1, False), C2f(192, 64, 1, False)
            self.d3, self.m4 = Conv(64, 64, 3, 2), C2f(192, 128, 1, False)
            self.d4, self.m5 = Conv(128, 128, 3, 2), C2f(384, 256, 1, False)
            self.detect = Detect([64, 128, 256])

        def forward(self, x):
            p3 = self.p3(self.stem(x))
            p4 = self.p4(p3)
            p5 = self.p5(p4)
            n4 = self.n4(torch.cat([self.up(p5), p4], 1))
            n3 = self.n3(torch.cat([self.up(n4), p3], 1))
            m4 = self.m4(torch.cat([self.d3(n3), n4], 1))
            m5 = self.m5(torch.cat([self.d4(m4), p5], 1))
            return self.detect([n3, m4, m5])

    return Yolo()


SPECS = [
    TorchSpec("yolo", "detector", "YOLOv8n-style detector, 320x320: Conv+BN+SiLU, C2f, SPPF, upsample+concat",
              yolo, images("images", 320), {"images": {0: "batch"}}),
]
