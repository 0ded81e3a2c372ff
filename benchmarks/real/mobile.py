"""Mobile CNN family: MobileNetV2, MobileNetV3 (HardSwish, squeeze-excite) and an EfficientNet-style net
(SiLU, squeeze-excite), all 224x224 at width 1.0 with random weights."""

from __future__ import annotations

from benchmarks.real.common import TorchSpec, images


def _cbn(cin: int, cout: int, k: int, s: int, groups: int = 1, act=None):
    from torch import nn

    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


def _se(c: int, squeeze: int, act, gate):
    from torch import nn

    class SE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.act, self.gate = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1), act(), gate()

        def forward(self, x):
            return x * self.gate(self.fc2(self.act(self.fc1(x.mean((2, 3), keepdim=True)))))

    return SE()


def _inverted(cin: int, cout: int, k: int, s: int, expand: int, act, se=None):
    """An inverted residual block whose expanded width is ``expand`` times its input's."""
    return _inverted_mid(cin, cin * expand, cout, k, s, act, se)


def _head(cin: int, feat: int, act, classes: int = 1000):
    from torch import nn

    return [_cbn(cin, feat, 1, 1, act=act), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(feat, classes)]


def mobilenet_v2():
    from torch import nn

    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    layers, cin = [_cbn(3, 32, 3, 2, act=nn.ReLU6)], 32
    for t, c, n, s in cfg:
        for i in range(n):
            layers.append(_inverted(cin, c, 3, s if i == 0 else 1, t, nn.ReLU6))
            cin = c
    return nn.Sequential(*layers, *_head(cin, 1280, nn.ReLU6))


def mobilenet_v3():
    """MobileNetV3-Large layout: HardSwish in the later blocks, squeeze-excite gated by HardSigmoid."""
    from torch import nn

    se = lambda c: _se(c, max(8, c // 4), nn.ReLU, nn.Hardsigmoid)  # noqa: E731
    R, H = nn.ReLU, nn.Hardswish
    cfg = [(3, 16, 16, False, R, 1), (3, 64, 24, False, R, 2), (3, 72, 24, False, R, 1), (5, 72, 40, True, R, 2),
           (5, 120, 40, True, R, 1), (5, 120, 40, True, R, 1), (3, 240, 80, False, H, 2), (3, 200, 80, False, H, 1),
           (3, 184, 80, False, H, 1), (3, 184, 80, False, H, 1), (3, 480, 112, True, H, 1),
           (3, 672, 112, True, H, 1), (5, 672, 160, True, H, 2), (5, 960, 160, True, H, 1), (5, 960, 160, True, H, 1)]
    layers, cin = [_cbn(3, 16, 3, 2, act=H)], 16
    for k, mid, cout, use_se, act, s in cfg:
        layers.append(_inverted_mid(cin, mid, cout, k, s, act, se if use_se else None))
        cin = cout
    return nn.Sequential(*layers, _cbn(cin, 960, 1, 1, act=H), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(960, 1280), H(), nn.Linear(1280, 1000))


def _inverted_mid(cin: int, mid: int, cout: int, k: int, s: int, act, se):
    """An inverted residual block: 1x1 expand to ``mid`` channels (none when ``mid == cin``), kxk
    depthwise, optional squeeze-excite, 1x1 project; a residual add when shapes allow."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [_cbn(cin, mid, 1, 1, act=act)] if mid != cin else []
            layers.append(_cbn(mid, mid, k, s, groups=mid, act=act))
            if se:
                layers.append(se(mid))
            layers.append(_cbn(mid, cout, 1, 1))
            self.body, self.res = nn.Sequential(*layers), s == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    return Block()


def efficientnet():
    """EfficientNet-B0 layout: MBConv blocks with SiLU and sigmoid-gated squeeze-excite."""
    from torch import nn

    cfg = [(1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 3, 2), (6, 5, 112, 3, 1),
           (6, 5, 192, 4, 2), (6, 3, 320, 1, 1)]
    layers, cin = [_cbn(3, 32, 3, 2, act=nn.SiLU)], 32
    for t, k, c, n, s in cfg:
        for i in range(n):
            se = lambda ch, cin=cin: _se(ch, max(1, cin // 4), nn.SiLU, nn.Sigmoid)  # noqa: E731
            layers.append(_inverted(cin, c, k, s if i == 0 else 1, t, nn.SiLU, se))
            cin = c
    return nn.Sequential(*layers, *_head(cin, 1280, nn.SiLU))


SPECS = [
    TorchSpec("mobilenet_v2", "mobile CNN", "MobileNetV2 1.0, 224x224, ReLU6", mobilenet_v2, images("input", 224),
              {"input": {0: "batch"}}),
    TorchSpec("mobilenet_v3", "mobile CNN", "MobileNetV3-Large layout, 224x224, HardSwish + SE (HardSigmoid)",
              mobilenet_v3, images("input", 224), {"input": {0: "batch"}}),
    TorchSpec("efficientnet", "mobile CNN", "EfficientNet-B0 layout, 224x224, SiLU + SE (Sigmoid)",
              efficientnet, images("input", 224), {"input": {0: "batch"}}),
]
