"""CNN family: ResNet-18, a U-Net segmenter and a Conv1D classifier over byte sequences."""

from __future__ import annotations

from benchmarks.real.common import TorchSpec, images, tokens


def resnet18():
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def unet():
    import torch
    from torch import nn

    def block(cin: int, cout: int):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self, base: int = 16, depth: int = 4, classes: int = 4):
            super().__init__()
            ch = [base * 2 ** i for i in range(depth + 1)]
            self.down = nn.ModuleList([block(3, ch[0])] + [block(ch[i], ch[i + 1]) for i in range(depth)])
            self.up = nn.ModuleList([nn.ConvTranspose2d(ch[i + 1], ch[i], 2, 2) for i in reversed(range(depth))])
            self.dec = nn.ModuleList([block(2 * ch[i], ch[i]) for i in reversed(range(depth))])
            self.head = nn.Conv2d(ch[0], classes, 1)

        def forward(self, x):
            skips = []
            for i, d in enumerate(self.down):
                x = d(x if i == 0 else nn.functional.max_pool2d(x, 2))
                skips.append(x)
            for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
                x = dec(torch.cat([up(x), skip], 1))
            return self.head(x)

    return UNet()


def byte_cnn():
    import torch
    from torch import nn

    class ByteCNN(nn.Module):
        """Embedding of bytes, strided Conv1D stack, global max pool, linear: a file-type classifier."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(256, 16)
            self.convs = nn.Sequential(nn.Conv1d(16, 64, 8, 4), nn.ReLU(), nn.Conv1d(64, 128, 8, 4), nn.ReLU(),
                                       nn.Conv1d(128, 128, 4, 2), nn.ReLU())
            self.fc = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 32))

        def forward(self, x):
            y = self.convs(self.emb(x).transpose(1, 2))
            return self.fc(torch.amax(y, dim=2))

    return ByteCNN()


SPECS = [
    TorchSpec("resnet18", "CNN", "ResNet-18, 224x224", resnet18, images("input", 224), {"input": {0: "batch"}}),
    TorchSpec("unet", "CNN", "U-Net segmenter, base 16, depth 4, 128x128, ConvTranspose + concat skips",
              unet, images("input", 128), {"input": {0: "batch"}}),
    TorchSpec("byte_cnn", "CNN", "Conv1D classifier over 4096 bytes (embedding, strided convs, max pool)",
              byte_cnn, lambda rng, b: {"input_ids": tokens(256, 4096)(rng, b)["input_ids"]},
              {"input_ids": {0: "batch", 1: "length"}}, sizes=(1, 8)),
]
