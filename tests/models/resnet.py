"""A small ResNet from torchvision's BasicBlock (torchvision/models/resnet.py): conv3x3 without bias,
BatchNorm2d in train mode (so running_mean, running_var and num_batches_tracked are compared too),
ReLU(inplace=True), `out += identity` with a conv1x1+BN downsample where the stride or width changes,
AdaptiveAvgPool2d((1, 1)), flatten, fc; SGD with momentum and weight decay, as the ImageNet example."""

from harness import Recipe

BATCH, CLASSES = 4, 10


_criterion = {}  # the example's `criterion = nn.CrossEntropyLoss()`, made once per framework outside the step


def build(torch):
    nn = torch.nn
    _criterion[torch.__name__] = nn.CrossEntropyLoss()

    def conv3x3(in_planes, out_planes, stride=1):
        return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)

    def conv1x1(in_planes, out_planes, stride=1):
        return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.conv1(x)
            out = self.bn1(out)
            out = self.relu(out)
            out = self.conv2(out)
            out = self.bn2(out)
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            out = self.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, layers=(1, 1), widths=(8, 16)):
            super().__init__()
            self.inplanes = widths[0]
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(self.inplanes)
            self.relu = nn.ReLU(inplace=True)
            self.layer1 = self._make_layer(widths[0], layers[0])
            self.layer2 = self._make_layer(widths[1], layers[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(widths[1] * BasicBlock.expansion, CLASSES)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * BasicBlock.expansion:
                downsample = nn.Sequential(conv1x1(self.inplanes, planes * BasicBlock.expansion, stride),
                                           nn.BatchNorm2d(planes * BasicBlock.expansion))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * BasicBlock.expansion
            for _ in range(1, blocks):
                layers.append(BasicBlock(self.inplanes, planes))
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer2(self.layer1(x))
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            return self.fc(x)

    return ResNet()


def batches(rng):
    return [(rng.standard_normal((BATCH, 3, 8, 8), dtype="float32"), rng.integers(0, CLASSES, BATCH))
            for _ in range(3)]


def loss(torch, model, images, target):
    criterion = _criterion[torch.__name__]
    return criterion(model(images), target)


def optimizer(torch, model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


RESNET = Recipe("resnet", build, batches, loss, optimizer)
