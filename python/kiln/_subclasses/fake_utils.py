"""CrossRefFakeMode: checks fake tensors against real kernels op by op (PyTorch's
torch._subclasses.fake_utils.CrossRefFakeMode; see Note [Fake cross-reference] in
tensor/fake_tensor.h).

    with CrossRefFakeMode() as check:
        model(x)                    # real tensors; every op also runs on fakes of its inputs
    assert not check.mismatches     # "aten::mm output 0: real size=[2, 3] ..., fake ..."
    check.seen                      # the ops compared

Unlike PyTorch's, it collects the mismatches instead of raising at the first one (raise_on_exit
raises one AssertionError listing all of them).
"""

from kiln import _C
from kiln._subclasses.fake_tensor import FakeTensorMode


class CrossRefFakeMode:
    def __init__(self, raise_on_exit=False):
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.fake_mode._cmode._crossref = True
        self.raise_on_exit = raise_on_exit

    @property
    def mismatches(self):
        return list(self.fake_mode._cmode._crossref_mismatches)

    @property
    def seen(self):
        return set(self.fake_mode._cmode._crossref_seen)

    def __enter__(self):
        _C._push_fake_mode(self.fake_mode._cmode)
        return self

    def __exit__(self, exc_type, exc, tb):
        _C._pop_fake_mode()
        if self.raise_on_exit and exc_type is None and self.mismatches:
            raise AssertionError("fake tensor metadata differs from the real kernels':\n" + "\n".join(self.mismatches))
        return False
