"""The digits data set (data/digits.csv.gz, provenance in data/README.md) and the two demo models.

A fixed split: numpy's RandomState(0) permutes the 1797 rows; the first 1437 train, the last 360
test. Pixels 0..16 are scaled to 0..1. Used by tools/demo.py and tools/bench/."""

import gzip
import os

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv.gz")
N_TEST = 360


def load_digits():
    """(x_train, y_train, x_test, y_test) as float32 [N, 64] and int64 [N] numpy arrays."""
    with gzip.open(DATA, "rt") as f:
        rows = np.loadtxt(f, delimiter=",", dtype=np.int64)
    order = np.random.RandomState(0).permutation(len(rows))
    rows = rows[order]
    x = rows[:, :64].astype(np.float32) / 16.0
    y = rows[:, 64]
    return x[:-N_TEST], y[:-N_TEST], x[-N_TEST:], y[-N_TEST:]


def mlp(lib):
    """64-128-128-10 with GELU."""
    nn = lib.nn
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))


def cnn(lib):
    """(Conv2d, BatchNorm2d, SiLU) twice, max pooling, Linear; input [N, 1, 8, 8]."""
    nn = lib.nn
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.SiLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.SiLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4 * 4, 10))
