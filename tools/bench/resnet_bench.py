"""resnet18's eager training step on the CPU (issue 19), kiln against PyTorch, interleaved.

    tools/python tools/bench/resnet_bench.py [--batch 16] [--size 64] [--rounds 5] [--profile] [--compile]

torchvision's resnet18 written once for both libraries (7x7 stem with stride 2, max pool, four
stages of two BasicBlocks, 64 to 512 channels, adaptive average pool, fc to 1000 classes), trained
with SGD (momentum 0.9, weight decay 1e-4) on cross_entropy, as the ImageNet example. Prints the
forward, forward+backward and whole step: CPU time at one thread (min and median of the rounds,
interleaved) and wall time at two; --profile adds kiln's and PyTorch's slowest ops of one step.
--compile adds inference in eval mode (running batch-norm statistics, no_grad), eager and through
kiln.compile / torch.compile (each warmed first), and the training step of a compiled copy of the
model ("step compiled": forward and backward compiled, the optimizer eager).
"""

import argparse
import statistics
import time

import numpy as np

import kiln

try:
    import torch
except ImportError:
    torch = None


def resnet18(lib, num_classes=1000):
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            stages, inplanes = [], 64
            for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                stages.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
                inplanes = planes
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(lib.flatten(self.avgpool(x), 1))

    return ResNet()


def setup(lib, args):
    lib.manual_seed(0)
    model = resnet18(lib)
    if lib is not kiln:  # the same weights in both
        model.load_state_dict({k: torch.tensor(v.numpy()) for k, v in setup.kiln_state.items()})
    else:
        setup.kiln_state = model.state_dict()
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 1000, args.batch))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    F = lib.nn.functional

    def forward():
        with lib.no_grad():
            model(x)

    def fwd_bwd():
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    phases = {"forward": forward, "forward+backward": fwd_bwd, "step": step}
    if args.compile:
        evaluated = resnet18(lib)
        evaluated.load_state_dict(model.state_dict())
        evaluated.eval()
        compiled = lib.compile(evaluated)

        def eval_forward(run):
            def go():
                with lib.no_grad():
                    run(x)
            return go

        phases["eval forward"] = eval_forward(evaluated)
        phases["eval compiled"] = eval_forward(compiled)

        trained = resnet18(lib)
        trained.load_state_dict(model.state_dict())
        compiled_train = lib.compile(trained)
        train_opt = lib.optim.SGD(trained.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

        def compiled_step():
            train_opt.zero_grad(set_to_none=True)
            F.cross_entropy(compiled_train(x), y).backward()
            train_opt.step()

        phases["step compiled"] = compiled_step
    return phases


def timed(fn, clock):
    # Let the other library's idle workers stop spinning first (PyTorch's OpenMP team spins for a
    # while after each parallel region, and kiln's pool for ~100 us): in one process each would
    # otherwise take a core from the other's next timed run.
    time.sleep(0.05)
    start = clock()
    fn()
    return clock() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    libs = [kiln] + ([torch] if torch is not None else [])
    phases = {lib: setup(lib, args) for lib in libs}
    print(f"resnet18 batch {args.batch} {args.size}x{args.size}, SGD momentum")
    print(f"{'phase':<18}{'kiln cpu@1 min/med ms':>24}{'torch':>16}{'ratio':>7}{'kiln wall@2':>14}{'torch':>9}{'ratio':>7}")
    for phase in ("forward", "forward+backward", "step") + (("eval forward", "eval compiled", "step compiled") if args.compile else ()):
        results = {}
        for threads, clock in ((1, time.process_time), (2, time.perf_counter)):
            for lib in libs:
                lib.set_num_threads(threads)
                phases[lib][phase]()  # warm
            times = {lib: [] for lib in libs}
            for _ in range(args.rounds):
                for lib in libs:
                    lib.set_num_threads(threads)
                    times[lib].append(timed(phases[lib][phase], clock))
            results[threads] = times
        k1, k2 = results[1][kiln], results[2][kiln]
        row = f"{phase:<18}{min(k1) * 1e3:12.1f}/{statistics.median(k1) * 1e3:<11.1f}"
        if torch is not None:
            t1, t2 = results[1][torch], results[2][torch]
            row += f"{min(t1) * 1e3:7.1f}/{statistics.median(t1) * 1e3:<8.1f}{min(k1) / min(t1):6.2f}x"
            row += f"{min(k2) * 1e3:12.1f}ms{min(t2) * 1e3:9.1f}{min(k2) / min(t2):6.2f}x"
        print(row, flush=True)
    if args.profile:
        for lib in libs:
            lib.set_num_threads(1)
            with lib.profiler.profile() as prof:
                phases[lib]["step"]()
            print(f"\n{lib.__name__}: one step at one thread")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
