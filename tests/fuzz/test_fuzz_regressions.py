"""Fuzz programs that once found a kiln bug, stored as they were generated (tests/fuzz/regressions/
seed<S>-<index>.json, written by tools/fuzz.py's --out) and re-run in every mode against PyTorch
2.13 in worker subprocesses. Stored, not regenerated, so a change to gen.py cannot swap them for
other programs. The bug each one found is in REGRESSIONS; add the program that found a bug when
fixing it."""

import os

import pytest

pytest.importorskip("torch", reason="PyTorch is the oracle and is only installed for Python 3.11")

from fuzz import driver  # noqa: E402
from fuzz.worker import BACKENDS  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions")

REGRESSIONS = {
    "seed7-0008": "x[x > 0] on a 0-d x: IndexError",
    "seed7-0020": "x.pow_(2) on an input, compiled: pow_.Scalar functionalized as pow.Scalar (std::get)",
    "seed7-0044": "x.max(dim=...).values compiled: the result came back a plain tuple",
    "seed7-0047": "an expanded input that requires grad, mutated: refused (synthetic base without _base)",
    "seed7-0129": "t_() on an expanded view that requires grad: refused eagerly (its gradient must sum)",
    "seed7-0157": "a mutated input the loss never reads got a zero gradient instead of None",
    "seed7-0170": "x.t_() on an input compiled: committed as a value, 'output with shape [5, 1] doesn't match'",
    "seed7-0301": "nan/inf .int() under inductor gave 0 (x86 gives INT_MIN)",
    "seed7-0680": "a transposed input mutated through a view: copy/fill/as_strided_scatter dropped its "
                  "layout, the gradient's signs came out transposed",
    "seed7-0745": "x.t_() on an input compiled: outputs came back transposed, silently",
    "seed7-0756": "x.t_() on an input aliasing another (a synthetic base's member) lost its new layout",
    "seed7-0797": "x[..., 0] = 2 on a transposed input that requires grad: wrong gradient (same layout bug)",
    "seed7-0860": "an expanded view of a 0-d intermediate returned: wrong gradient (same layout bug)",
    "seed7-0984": "bool add under inductor stored 2, read back as 2.0",
    "seed11-0195": "a mutation whose backward raises (clamp_max then copy_) raised at trace time for losses that never read it",
    "seed11-0908": "x1.add_(x0, ...) with x0 requiring grad: x0's gradient doubled (silent; the analysis run's history on the fakes)",
    "seed11-1449": "a dead local at a graph break left the graph: 0 * NaN gradient",
    "seed21-0396": "a write to an expanded view of an input requiring grad: its summed gradient built a real "
                   "index tensor under FakeTensorMode (AssertionError)",
    "seed21-1361": "mse_loss(int input, float target): the target's gradient was 0 (computed in the int dtype)",
    "seed21-1829": "x0.copy_(x2) with x2 requiring grad, compiled: x0 copied back under no_grad, x2's gradient lost",
    "seed41-0061": "x.chunk(...)[0] used after its base changed in place: PyTorch refuses (a split output), kiln's "
                   "chunk was slices",
    "seed41-0109": "x2 & v0 (bool & float, shapes that do not broadcast): kiln reported the dtype, PyTorch the "
                   "shapes first",
    "seed41-0193": "baddbmm with 0-d batches: PyTorch's IndexError (batch1.size(0)), kiln's RuntimeError",
    "seed41-0416": "clamp(x, t, 0.5) with t requiring grad: PyTorch's TypeError (a tensor is a Scalar only 0-d "
                   "without grad)",
    "seed41-0625": "index_select out of bounds on dim 1: PyTorch's RuntimeError there, IndexError elsewhere",
    "seed41-0864": "clamp(x0, min=x2), graph break, x2[:1] = 0: inductor saved the mask, not x2, so the change went "
                   "unchecked",
    "seed41-1029": "float(x.amax()) then x.t().add_(1): the compiled backward checked x, saved only for amax's "
                   "unused output",
    "seed41-1196": "bool - bool: PyTorch refuses subtraction on bools",
    "seed41-1718": "sign(nan) is 0 in PyTorch, kiln gave nan",
    "seed51-0188": "index_put_ through an expanded view requiring grad: PyTorch's backward refuses (copy_ into "
                   "overlapping memory), kiln summed",
    "seed51-0361": "clamp(min=...) of a NaN: PyTorch's gradient there is 0, kiln passed the gradient through",
    "seed51-0772": "a split piece of an input modified in place, compiled with grad: the output was rebuilt as a "
                   "plain view, so the multi-output view error did not come",
    "seed51-1008": "v0[::2] returned before v0 (an .item() break): v0 was rebuilt as a view of it, its other rows "
                   "got no gradient",
    "seed51-1147": "a write through x[::2].split(1)[-1], compiled: the scatter addressed a contiguous stand-in, two "
                   "rows early",
    "seed51-2514": "clamp with a 0-d bool bound (a Scalar in PyTorch) and a NaN input: gradient passed instead of 0",
    "seed61-0205": "v0 = 2.5 / x0, then x0[::2].zero_(): PyTorch computes x0.reciprocal() * 2.5 (saves the "
                   "reciprocal), kiln's div saved x0 and its backward raised",
    "seed61-1740": "x3[x0] with a 0-d integer x0 is a view in PyTorch (select), then x3.zero_(): kiln "
                   "gathered a copy",
    "seed61-2196": "x0 = b[1:] and x0.t() passed together, one mutated: the synthetic base started at offset 3 "
                   "and its fake's storage was too short (setStorage out of bounds)",
    "seed71-0075": "pow with an integer exponent tensor, then abs_ of the result: PyTorch's backward raises (every "
                   "saved output is unpacked), kiln's trained",
    "seed71-0094": "Tensor.index_add was missing (AttributeError); here its dtype error",
    "seed71-0366": "min-cut saved an input no backward node reads (recomputing from it): its change after the call "
                   "raised",
    "seed71-0404": "(v0, v0[None]) under inductor: v0's size-1 dim had another stride than eager's, so v0[None] "
                   "came back a separate tensor",
    "seed71-0518": "sub(int, int, alpha=0.5) whose result is unused, compiled: the alpha check ran in the kernel only",
    "seed71-0593": "masked_fill_ through an expanded view with no elements: the overlap check of the backward "
                   "refused it (an empty view repeats no element)",
    "seed71-0696": "a mutated input whose new value the backward reads, changed after the call: no version error",
    "seed71-0805": "div(x, x, rounding_mode='trunc') then x[..., 0] = 0: PyTorch saved x and its backward raises",
    "seed71-1071": "cat of a 1-D empty piece computed from a 0-d input: the input's gradient was None, PyTorch's zero",
    "seed71-1201": "relu_ on an expanded input: kiln wrote each element several times where PyTorch refuses",
    "seed71-1258": "index_add with an index past a 1-D self: IndexError 'index out of range in self'",
    "seed71-1629": "x.split(1)[-1] @ its .t() under inductor: the view of the extern split piece lost the piece's "
                   "storage offset and read row 0 (silent)",
    "seed71-1875": "layer_norm of equal values: x * rstd - mean * rstd gave -3e-5, log() of it nan where PyTorch "
                   "gives -inf",
    "seed71-2274": "x[:, i] of a [0, 0] tensor: PyTorch refuses an index into an empty dim, kiln returned empty",
    "seed71-2412": "an input's new value, saved by the compiled forward as its own buffer, changed past a graph break",
    "seed71-2554": "min-cut saved an input eager does not save: an in-place change after the call raised in backward",
    "seed71-2602": "x.contiguous() of a strided mutated input requiring grad, compiled: traced through a contiguous "
                   "clone, the later relu_ showed through the 'copy' (silent)",
    "seed71-3458": "(x / 0).sum() under inductor: fully unrolled and factored into sum(x) / 0, inf instead of nan",
    "seed71-3595": "clamp(x, -0.5, t) with t a 0-d float64 tensor: PyTorch binds t as a Scalar (float32 result), "
                   "kiln bound the Tensor overload (float64)",
    "seed81-0362": "a mutated strided input requiring grad, copied in its layout (empty_strided + copy): the saved "
                   "empty_strided shadowed the inductor wrapper's own function (UnboundLocalError)",
    "seed81-0566": "x[0] = x for x of shape [1, 1, 3]: the overlap check refused it (a size-1 dim's stride)",
    "seed81-0781": "min-cut saved an input eager does not save: an in-place change after the call raised in backward",
    "seed81-1206": "prod's result changed in place before the backward: PyTorch saved it (prod_backward reads it) and "
                   "raises",
    "seed81-1501": "backward specialised to an absent tangent: zeros read with strides (1, 4) over 4 elements (buffer "
                   "too small)",
    "seed81-2343": "matmul of [3, 5, 0] by [0]: reshape(-1, 0) was ambiguous",
    "seed81-2419": "min-cut saved an input eager does not save: an in-place change after the call raised in backward",
    "seed81-2554": "int64 ** negative int64 under inductor: through double, 0 ** -1 was inf, cast to INT64_MIN",
    "seed81-2714": "a mutated input's new value read by the backward, changed after the call: eager's version error "
                   "was lost",
    "seed81-3594": "index_put whose indexing result is empty: an out-of-range index raised where nothing is written",
    "seed91-0033": "diagonal under dynamic shapes was a graph break: the write through it ran after the graph saved "
                   "the value it overwrote, and eager's version-counter error was lost",
    "seed91-0063": "index_put on a 0-d self with a float value: PyTorch's 'too many indices' IndexError comes before "
                   "the dtype check",
    "seed91-0243": "index_put saved no index tensors: x0.relu_() after index_put((x0,), ...) went unchecked (PyTorch "
                   "raises in backward)",
    "seed91-0576": "x1.pow_(2); x1 @ x0.t(), then x1[::2].zero_() past a graph break: eager saved x1 and raises",
    "seed91-1048": "(argmin + -inf).pow(0.5) under inductor: libm's pow(-inf, 0.5) is +inf, eager's sqrt gives nan",
    "seed101-0199": "[3, 5] float64 @ [3, 5, 0] float32: PyTorch's bmm gives an empty float32 result, kiln's mm raised "
                    "(matmul folds as PyTorch's should_fold)",
    "seed101-0310": "v0.chunk(2)[0] returned with v0 came back an as_strided view: its mul_ after a graph break ran "
                    "(eager refuses)",
    "seed101-0395": "mv of a 0-d self: PyTorch's IndexError (addmv reads self.size(0)), kiln's RuntimeError",
    "seed101-0619": "v1[v1 > 0] = 1 into x1.expand(2, ...): functionalize refused writes into an expanded view",
    "seed101-0996": "v3[0] = v2 (0-d, requires grad) into an int tensor: PyTorch flags the int tensor requires_grad "
                    "(not compared)",
    "seed101-1545": "min-cut saved input x2 (recomputing its reciprocal): x2[::2].zero_() after the call raised in "
                    "backward",
    "seed101-1831": "an unused index_put whose value cannot broadcast: the meta did not check, so compiled code "
                    "dropped it and ran",
    "seed111-0098": "std of min(): the NaN upstream spread over every element; PyTorch's max()/min() backward puts "
                    "exact 0s off the extremum",
    "seed111-0337": "atan2(x2, x2) at x2 == 0: kiln's gradient 0 / 0 = NaN, PyTorch's is 0",
    "seed111-1439": "v4 = v3[0] changed in place, returned with v3 laid out otherwise by the compiler: v4 came back "
                    "unaliased",
    "seed111-1977": "x1 // bool mask, then x1.neg_(): kiln's div.Tensor_mode read x1 without other needing grad "
                    "(PyTorch trains on)",
    "seed121-0378": "a split piece of a mutated input came back as an as_strided view: copy_ into it after a graph "
                    "break ran",
    "seed121-0872": "mse_loss(float32 [3, 3], float64 0-d): kiln promoted before broadcasting (float32), PyTorch after "
                    "(float64)",
    "seed131-0701": "v0 = x1.float() (x1 float) then v0.t_(): Dynamo made v0 a separate graph value, so the output was "
                    "not re-laid",
    "seed131-0857": "relu of a bool tensor: PyTorch's RuntimeError (Boolean inputs not supported), kiln's "
                    "NotImplementedError",
    "seed131-2755": "baddbmm of empty bool batches: PyTorch returns the empty result, kiln's meta refused Bool",
    "seed131-3421": "int // x0 with x0 requiring grad, then x0.div_(2): PyTorch saved x0 for other's gradient and "
                    "raises",
    "seed141-0080": "an extern copy_ of a strided view of an intermediate, read by the next kernel by the view's "
                    "strides: its result was row-major",
    "seed141-0903": "backward of a step-2 view of a mutated strided input: the base-shaped gradient was viewed by "
                    "strides a functional fill had not kept",
    "seed141-1200": "div with a rounding mode unpacks inputs its zero gradient does not read: a mutation past a graph "
                    "break must raise as eager's saved-tensor check",
    "seed151-0137": "index_select of an empty result read out-of-range indices unchecked (an index_add backward; "
                    "PyTorch raises)",
    "seed161-0668": "x1[0] = x1.select(1, 0): the value, 0-d once its leading 1s were dropped, was not expanded "
                    "before copy_ (an overlap error)",
    "seed171-0826": "x.fill_(2.5) then x.t().sum() under inductor: the loops merged for the constant fill read its "
                    "realized buffer as the transpose ('too small')",
    "seed171-1875": "gather saves self (PyTorch's formula names it): an in-place change to it before the backward "
                    "raises",
    "seed171-4054": "an empty expanded input written with a value that requires grad came back requires_grad=False "
                    "(the copy-back narrowed it first)",
    "seed171-5613": "x0.fill_(2.5), then the mean of ceil(x0).permute(1, 0): the same merged loop over the realized "
                    "fill",
    "seed171-5882": "int64 a ** b that overflows under inductor: through double it gave INT64_MIN, eager wraps around",
    "seed171-6003": "v0.t() @ x saves v0.t(), an .item() break, then v0.zero_(): inductor lost the version error eager "
                    "raises",
    "seed171-6849": "float32 gelu below about -5.8: PyTorch's 0.5 * x * (1 + erf(x / sqrt 2)) rounds to 0, kiln's "
                    "erfc-based CDF kept a tiny tail",
    "seed171-8061": "v4 = full_like(v0, 3)[::2]; return v4, v4.select(-1, 0) under inductor: the select computed "
                    "apart, not a view of v4",
    "seed171-8552": "prod's gradient at an inf element is result / input (NaN) as PyTorch's eager prod_backward",
    "seed171-12153": "x0.log().chunk(2, -2)[0].sub_(...) after a graph break: the piece of an intermediate came back a "
                     "tensor of its own, so the multi-output view error did not come",
    "seed171-12755": "v2 = (0 - x1)[..., 1:]; return v2, v2.chunk(2, -3)[0] under inductor: the chunk split a copy of "
                     "v2",
    "seed171-13993": "scatter_add with a 0-d src (a src of shape [1], as PyTorch's ensure_nonempty_size): the shape "
                     "check indexed past its sizes and aborted",
    "seed171-14850": "prod(x) saves x, an .item() break, then x.pow_(2): compiled code lost the version error eager "
                     "and torch.compile raise in backward",
    "seed171-17248": "x1.t_() on an input, then x0 / x1: the compiled backward raised a version error (the epilogue's "
                     "as_strided_ bumped the saved view's version after the forward recorded it)",
    "seed171-18215": "scatter_reduce with a 0-d src: IndexError in the composite's narrowing",
    "seed171-19747": "layer_norm of a transposed input under inductor: the decomposition followed its strides (eager's "
                     "is row-major)",
    "seed171-22552": "v2 = -logsumexp(...); return v2[:, ::2], v2[::2] under inductor: two slices of one intermediate "
                     "in two storages",
    "seed171-23127": "x2.chunk(2, 0)[0].t().add_(1) compiled with grad: t carries no view tag, so the output was "
                     "rebuilt as an as_strided view and the multi-output view error did not come",
    "seed171-25553": "float16 x.pow(0.5) at -0.0: PyTorch runs libm's pow for float16 (its gradient 0.5 * x ** -0.5 is "
                     "+inf), kiln sqrt/rsqrt (-inf)",
    "seed171-26060": "a dead scatter with out-of-range indices under dynamic shapes: its meta function read a concrete "
                     "index size, so the fake run failed and the scatter ran eagerly",
    "seed171-27365": "v1.split(1, 1)[-1][..., 0] = 0.5 after a graph break at the store: resumed at it, the store was "
                     "traced again and went through a synthetic base (no multi-output view error)",
    "seed171-27596": "(v.diagonal() - v) stored in place over v while the extern diagonal, a view of v, was read by "
                     "that kernel: silently wrong",
    "seed171-29538": "x.t_() on a bool input then an op saving it: the same spurious version error",
    "seed181-1153": "addmm of empty bool matrices raised NotImplementedError; PyTorch returns the empty result before "
                    "its dtype dispatch",
    "seed181-2555": "x1.t_() on an input x2 = x1.t() aliases, then x2 * x2: the synthetic base's members were re-laid "
                    "after the compiled backward read its versions: a spurious version error",
    "seed181-4128": "bmm(bool, int64): PyTorch refuses Bool (NotImplementedError) before comparing the dtypes",
    "seed181-5645": "x1.t_() on x1 = x0.t(), then an op saving x0: the same spurious version error (re-laid after the "
                    "versions were read)",
    "seed181-12912": "index_select saves x3.flatten(), then x3.t_(): the joint's failed first trace left the fake x3 "
                     "transposed, its retrace copied the index and lost eager's version error",
    "seed181-14906": "prod(-x) then x.mul_(1) past a graph break: min-cut saved x to recompute -x, and x's saved-value "
                     "check raised where eager (which saved -x) does not",
    "seed181-16108": "float32 softmax 1 ulp from PyTorch's, compared at float64 tolerance: the float32 came from "
                     "where(int, int, -1.5)",
    "seed181-16118": "after the dynamic-shape recompile, .contiguous() of x.t() + 1 was dropped (the symbolic meta "
                     "called it row-major): an alias",
    "seed181-17136": "x1.t_() on x1 = x0.t() of an expanded input, then ops saving x0: the same spurious version error",
    "seed181-17144": "min saves its result v1, returned past a graph break, then v1.t_(): inductor's forward saved a "
                     "mask, and the change went unchecked (eager raises)",
    "seed181-18010": "copy_ between two views of the same data (x[0] = x on an expanded x) raised the internal-overlap "
                     "error; PyTorch returns first",
    "seed181-19336": "layer_norm(-x) of two close values: kiln's double moments gave symmetric outputs, PyTorch's "
                     "float32 Welford does not; the gradients differed",
    "seed181-20099": "max()/min() over all elements kept the first of +0./-0., PyTorch the last (atan2 of it gave pi "
                     "for -pi)",
    "seed181-22566": "cat skipping a legacy empty input then mutated: its zeros({0}) gradient, made from no tangent, "
                     "summed with an absent one came back None (eager: tensor([]))",
    "seed181-22811": "layer_norm(x + float(x.sum())): a large offset leaves a small variance; gradients differed in "
                     "the last bits (double vs float32 moments)",
    "seed181-26604": "log1p(layer_norm(x)) of a two-element row: log1p(-0.99999) magnified the last bits of kiln's "
                     "double-precision moments; now aten's float32 cascaded Welford (inductor: torch.compile's values)",
    "seed181-26811": "layer_norm(x / x + 3): a constant row, whose backward multiplies by 1/sqrt(eps); x / x's "
                     "other-gradient is now PyTorch's -grad * ((self / other) / other)",
    "seed181-27091": "addmm(float self, bool, bool): PyTorch's self/mat2 dtype check comes before the Bool dispatch",
    "seed181-28371": "v1 and its piece v1.split(1, -1)[-1] passed to a resumed frame, then piece[:1] = 0: their "
                     "stand-ins were plain views, so the compiled forward ran",
    "seed191-0048": "diagonal (a fallback) of v3[::2], a strided view with gaps of a transposed intermediate: its "
                    "input was copied dense, so the abs kernel read the result by the meta strides past the copy's "
                    "end; and slice_scatter's contiguous result gave the outputs other strides than eager's",
    "seed191-3329": "std(v4, dim=-2) of a constant column under Inductor with grad: the float32 sum / n mean was an "
                    "ulp off, std 4e-8, and v3 % std finite where eager's is NaN",
    "seed191-4329": "log_softmax of a one-element row holding -0.: PyTorch computes (x - max) - log(sum), +0.; kiln x "
                    "- (max + log(sum)), -0. (reciprocal: -inf for inf)",
    "seed191-10812": "v3 = v1[::2] of a v1 requiring no grad, then v1.copy_(x3): v3 kept no history in kiln, so x3's "
                     "gradient missed v3's part (a silent wrong gradient)",
    "seed191-11539": "mse_loss(float16 x, float32 t) then x.add_(...): kiln's functional promoted x to a float32 "
                     "copy, which the backward saved, so the version error PyTorch raises never came; the loss ops "
                     "now promote inside and the target's gradient is the swapped backward",
    "seed191-11897": "remainder(+-inf, other): other's gradient floored self / other to +-inf; PyTorch's -grad * "
                     "self.div(other, rounding_mode='floor') is NaN",
    "seed191-14418": "-1.5 / gelu(x) where gelu gives a zero: PyTorch's float gelu is 0.5 * fma(x, erf, x), +0. at -0. "
                     "and below -5.8; kiln's x * cdf gave -0.",
    "seed191-14962": "fmod(prod(x), v) % ...: kiln's float32 prod accumulated in double; PyTorch multiplies in "
                     "float32 in its vectorised order (AVX2 lanes), transposed inputs in memory order",
    "seed191-23897": "a dead index_put(accumulate=True): call0's out-of-range index is never read compiled (as in "
                     "PyTorch's compile), call1's value that cannot broadcast is refused by the trace (as eager "
                     "refuses it): each call matches one reference",
    "seed191-25696": "pow's exponent gradient at base 0 with an inf/NaN upstream gradient: kiln masked the whole "
                     "product (0), PyTorch masks the factor (NaN)",
    "seed191-27246": "fmod's backward divides by a 0-d float64 tensor: PyTorch's bfloat16 mul/div read a one-element "
                     "second operand in float, kiln rounded it to bfloat16 first",
    "seed211-2015": "remainder(x, logsumexp(int rows)): kiln summed exp in double, so a row [0, -24] gave log(1 + "
                    "4e-11) = 4e-11; PyTorch's composite sums in float32 (1) and gives 0, so remainder by it is NaN",
    "seed211-2796": "layer_norm(int64 x, weight=float64): PyTorch's mixed-dtype check (parameters must be float32) "
                    "comes before the kernel's dtype dispatch; kiln refused the int input first "
                    "(NotImplementedError)",
    "seed211-4860": "v3 returned from a graph, then v3.fill_(): Inductor's min-cut saved v3 (cheaper than 2 / v3's "
                    "reciprocal, which eager saves), so the compiled backward raised where eager trains on",
    "seed211-5436": "hardtanh(log(x)) where log gives NaN: PyTorch's vectorised hardtanh_backward zeroes the "
                    "gradient of a NaN input, its scalar tail keeps it; kiln kept it everywhere (a silent wrong "
                    "gradient)",
    "seed211-9261": "softmax in float32: kiln's exp differs from Sleef's in the last bit for ~10% of values, "
                    "magnified downstream; judged against PyTorch float64",
    "seed221-3436": "x0.index_put((v0,), v0) with repeated rows and a transposed v0: the last write is the one "
                    "PyTorch's TensorIterator order gives",
    "seed221-4021": "fill_ of an expanded input and a dead out-of-range index_select: torch.compile refuses the fill_, "
                    "so eager PyTorch without the dead statement is the reference",
    "seed221-6068": "var(dim=0, correction=0) of equal values: PyTorch reduces to one value around the mean rounded to "
                    "float32 (a tiny variance), kiln's double mean gave 0",
    "seed221-7082": "v0 ** x0 for negative bases, then trunc: Inductor contracted the backward's sum of 0 * (pow's NaN "
                    "log term) into an FMA that LLVM folds to the accumulator under reassoc, so the leaf's gradient "
                    "was finite where PyTorch's is NaN",
    "seed221-8805": "v0[0] = x0 with v0 a permuted view of a [1, 1] x0: PyTorch compares every stride of two "
                    "one-element views (the source is a 0-d view expanded to [1], stride 0) and refuses; kiln ignored "
                    "size-1 strides and wrote",
    "seed221-9207": "int x1[0] = bfloat16 x2 requiring grad: PyTorch gives the integer tensor a grad_fn and asserts in "
                    "backward (a PyTorch bug, no oracle for gradients)",
    "seed231-0142": "int x2[0] = float x0 requiring grad, then bitwise_not(x2): PyTorch refuses in the forward (the "
                    "integer tensor joined its graph), no gradient oracle",
    "seed241-4345": "v1 = x1.chunk(2, -2)[0], then x1[x1 > 0] = 1, then v1.to(int): PyTorch's _to_copy to an integer "
                    "dtype records nothing and reads no stale history; kiln raised the multi-output view error",
    "seed241-5573": "split piece p of layer_norm(x), x.fill_(2), then p[:1] = 0: p's backward raises (deferred), and "
                    "the compiled output was no split piece any more, so the in-place change went through where eager "
                    "refuses",
    "seed251-0663": "var of one element (correction 1) under Inductor: the constant-row shortcut gave 0 where eager's "
                    "0 / 0 is NaN",
    "seed261-1499": "v2 = x2.prod() of a 0-d x2 returned across a .item() break, then v2.masked_fill_(): eager's "
                    "ProdBackward saved v2 and raises; the compiled graph read no v2, so nothing was watched",
    "seed261-6773": "softmax(x1 ** x1) in bfloat16 under Inductor: the row max was rounded to bfloat16 while the "
                    "exponentials read float32, so a row's largest element came out 1.42",
    "seed271-7506": "-1.5 / log_softmax(x) with a log_softmax near 0: an ulp of the log-sum-exp (kiln's exp and log "
                    "are not Sleef's) is 1e-4 of the gradient; judged against PyTorch float64 within 8x PyTorch "
                    "float32's error",
    "seed281-0096": "a dead out-of-range index_select after x1.pow_(2) on an input passed twice: torch.compile's "
                    "backward raises a version error that eager without the dead statement does not; that program is "
                    "a reference too",
    "seed281-1325": "v1 = v0[x1, x1] with a transposed index x1, then v1.int().flatten(): PyTorch's index result "
                    "follows the index's memory order, so the flatten copies; kiln's row-major result was viewed (an "
                    "alias PyTorch does not have)",
    "seed281-15366": "v2 = x1.reshape(-1).squeeze(), then v2[0] = x2 requiring grad: the write's base was the middle "
                     "view, not x1, so x1 got no history and x2's gradient missed x1's part of the loss",
    "seed281-19137": "v3 = x0.flip(1).contiguous() of a transposed x0, then v3.sigmoid_(): kiln's contiguous flip "
                     "made contiguous() an alias, so sigmoid_ changed the flip too",
    "seed291-1051": "x1 and x2 empty views of one storage, x1.mT.abs() then x2.neg_(): eager's backward raises (the "
                    "shared version moved); empty inputs formed no synthetic base, so the compiled backward did not",
    "seed291-3209": "v2 = hardtanh(x1).split(1, 0)[-1] of an empty x1, then v2.exp_(): the empty piece was returned "
                    "as a tensor of its own (empty outputs had no alias root), so the in-place change went through "
                    "where eager refuses",
    "seed291-10318": "fmod(x3, gelu(x3)) under inductor: its gelu took the accurate erf, eager's (and PyTorch's) "
                     "Abramowitz and Stegun's, 1.4e-4 apart after fmod",
    "seed291-16413": "div(x1, x3, rounding_mode='floor') of an expanded int64 x1 and a transposed float32 x3, then "
                     ".view(3, 3, 5): PyTorch orders the result by the cast of x1 (row-major), kiln by x3 "
                     "(transposed), and the view failed",
    "seed301-3415": "x2.sigmoid_() then x2.sqrt().min() of a bfloat16 input under inductor: the sqrt, computed inline "
                    "in float32, matched the bfloat16 minimum nowhere and min's gradient was lost (bfloat16 now rounds "
                    "at every op)",
    "seed301-17102": "v0 = log(x1) of a negative 0-d x1, then v0.var(): PyTorch's var_backward over everything with no "
                     "degrees of freedom gives inf where x != mean (a NaN x too), kiln's inf * NaN gave NaN",
    "seed301-17642": "log_softmax(v2, dim=0) < 0 where the maximum's tail is 4.5e-11: PyTorch sums exp in float32 (the "
                     "sum rounds to 1, the result is 0), kiln summed in double and gave -4.5e-11",
    "seed301-17650": "div(x1, leaky_relu(x1, 0.1), rounding_mode='trunc') in float16: PyTorch rounds the quotient to "
                     "float16 before trunc (10), kiln truncated the float quotient 9.99 to 9",
    "seed311-8534": "v1.scatter(-2, v1, x0) with a 2-d index and a 1-d src: PyTorch checks src.size(d) over self's "
                    "dims first (IndexError), kiln its number of dims first (RuntimeError)",
    "seed321-1234": "v1.index_put((x1,), v1) with a 0-d index and a [1] value: PyTorch's op broadcasts the value as it "
                    "is (shape mismatch, RuntimeError), kiln dropped its leading 1 and then raised IndexError on the "
                    "index",
    "seed321-2595": "x * x.sum().item() / x: the gradient is rounding noise (0 in float64) that a differently "
                    "ordered float32 sum moves by 1e-5; judged by PyTorch's own spread under an ulp of input noise",
    "seed321-6889": "x1.index_put((x0,), x1, accumulate=True) with a 0-d index and a [1, 1, 1] value: the op dropped "
                    "the value's leading 1 and succeeded where PyTorch's shape check raises",
    "seed321-6940": "argmax(x * layer_norm(y).mean().item()) / ...: the mean is rounding noise whose sign and "
                    "zero-ness pick the values; judged by PyTorch's own spread under an ulp of input noise",
    "seed321-9173": "a view made before its base required grad, written in place after a sibling's copy_ gave the base "
                    "a history: PyTorch's in-place check reads it as a leaf (its history is regenerated only when "
                    "asked for); torch.compile's guards ask, so its compile is the reference",
    "seed321-11679": "min-cut saved the input x0 only to recompute where(x0 > 0, x0, -1) for max's backward; x0.fill_ "
                     "past a graph break changed what the compiled backward recomputed from: a wrong gradient, "
                     "silently (such saved inputs are now cloned)",
    "seed321-15804": "v0 // x2.clamp_min(0) in bfloat16 under inductor/grad: LLVM's maxnum gave +0. for clamp_min(-0., "
                     "0), eager -0., so 1 // it was inf, eager -inf",
    "seed321-19161": "-1 / x.norm() of an all-zero x: the 2-norm's backward gave 0 where PyTorch's gives NaN (inf "
                     "times the masked self / norm)",
    "seed321-19750": "x[0] = 0-d value into an expanded integer chunk piece: PyTorch fills (copy_to), and fill_ of a "
                     "multi-output view with a value requiring grad is refused",
    "seed321-19969": "an in-place op with a value requiring grad on a chunk piece of a tensor requiring no grad: "
                     "refused, as PyTorch's multi-output views",
    "seed331-5452": "x1.t_(); return x1.contiguous() under dynamic shapes: the output is the relaid input itself, "
                    "whose alias was recorded after the fake input's layout was restored, so the compiled call "
                    "returned it untransposed",
    "seed331-10861": "x[..., 0] = -1 of an expanded x: setitem of a 0-d value fills (PyTorch's copy_to), and fill_ "
                     "with a tensor value refuses a destination whose elements repeat",
    "seed341-5292": "an output the compiled function defers a backward error for (_RaiseInBackward), changed in place "
                    "by the program: its view was marked as made under no_grad and the in-place op refused",
    "seed341-8800": "rsqrt(x).tanh() of a -0.0 (1 / sqrt(-0.0) = -inf): LLVM 14 took the quotient for never negative "
                    "and folded tanh's clamp away, NaN for eager's -1",
    "seed341-9880": "an output view of the compiled forward changed in place by the program: the view was marked as "
                    "made under no_grad (the forward's own) and the in-place op refused",
    "seed351-3429": "a version error eager's backward raises for x1 (saved by div, changed by setitem past a graph "
                    "break), which torch.compile's backward does not raise either: torch.compile is the reference",
    "seed361-16116": "x0.add_(x0.view(-1)) with x0 = b[::2] of one element: view gave stride 1, not 2, and the write "
                     "was refused as a partial overlap",
    "seed371-3296": "bfloat16 x // log_softmax(x): the row's sum of exps and its log are rounded to bfloat16 in "
                    "PyTorch's lastdim kernel; kiln's kernel and Inductor kept them in float32 and gave -6 for -7",
    "seed381-3444": "gelu of a 0-d amin() (-2.91) divided into 1.36 and floored: -259, PyTorch -260; one element takes "
                    "PyTorch's scalar loop, libm's erf, where 1 + erf cancels",
    "seed381-13061": "x0.index_add(0, i, x0) then x0.pow_(2): PyTorch's backward raises the version error of the saved "
                     "source, kiln saved none and went on",
    "seed391-2408": "trunc(tanh(v) / leaky_relu(tanh(v), 0.1)): kiln's float tanh was up to 1.26 ulp off and differed "
                    "from PyTorch's by an ulp on 12% of inputs in [-1, 1], which the quotient's trunc made 10 for 9; "
                    "tanhf is now computed in double and correctly rounded (Note [tanhf in double])",
    "seed401-11800": "a split piece of v1 = any(x, 2)[:, ::2] under inductor: v1 was computed into a compact buffer, "
                     "so split's pieces had other strides than the graph's meta values, and the next kernel read the "
                     "last piece with v1's gaps, past its storage; a value an extern op reads is now computed in its "
                     "meta layout, gaps included",
    "seed401-17474": "v0 = x.split(1, -1)[-1]; x.neg_(); -1 / v0 in a resumed frame whose inputs x and v0 share "
                     "memory: eager raises that the split piece's base was modified in place; the synthetic base "
                     "rebuilt v0 from x and never read its grad_fn, so compiled ran on",
    "seed411-5611": "if layer_norm(x).sum().item() > 0 with an unused bfloat16 input: the sum is 2.6e-7 in float64, "
                    "kiln's float32 1.2e-6 and PyTorch's 0.0, so the branches differ; kiln's is float64's, but the "
                    "judge skipped the float64 reference for the bfloat16 input nothing reads (the precision floor now "
                    "counts only what reaches an output)",
    "seed421-0052": "x.t_(); v = x.split(1, -1)[-1] returned, then v[:1] = 0 after the graph: eager refuses the "
                    "in-place change of a split piece; AOT rebuilt the returned piece by as_strided (the input's "
                    "layout had changed), a plain view that took the write; a rebuilt output that was a split piece is "
                    "one again",
    "seed431-13552": "v2 == x1 of a bfloat16 vector and a float32 0-d x1 (1.3894): eager rounds x1 to bfloat16 "
                     "(1.3906) and finds them equal; inductor compared in float32; a comparison now computes in its "
                     "operands' promoted dtype",
    "seed431-15807": "matmul of an empty int64 batch and a bool one: PyTorch succeeds, but raised under the harness's "
                     "dtype-recording dispatch mode, which made the reference an error; the harness confirms a "
                     "reference exception without the mode",
    "seed441-10326": "bool (0, 1, 3) @ float (1, 3, 1) that requires grad: PyTorch drops the batch of 1 and runs mm, "
                     "which refuses the dtypes; kiln ran an empty bmm",
    "seed451-2371": "relu(-0.0) is -0.0 in PyTorch (clamp_min keeps x when equal to 0); kiln's eager kernel gave +0.0, "
                    "so a division by it flipped inf's sign",
    "seed801-0062": "layer_norm of a bfloat16 input with float32 weight and bias under inductor: mean and rstd "
                    "rounded to bfloat16 (eager keeps float32), a gradient of 0.0011 came out -0.076",
    "seed831-0447": "x1[0] = x2.std() of one element (nan) into an int32 tensor: kiln converted through int64 and "
                    "stored 0, PyTorch converts straight to int32 (-2147483648)",
    "seed871-0444": "an expanded empty input (0, 1) written in place under AOT: functionalization's scatter into the "
                    "overlapping view took argmax over the size-0 repeated dim, which raises (hidden while the "
                    "fuzzer let a compile that failed fall back to eager)",
    "seed871-1248": "the same through x2[:1] = 0 and fill_ of an expanded empty input",
    "seed881-2998": "softmax(expm1(x.t())): libmvec's vector log (in expm1) rounded otherwise than libm's in the "
                    "vector loop's remainder, so expm1(x) - max(expm1(x)) was 1 ulp above 0 and the cancelling "
                    "softmax backward gave a gradient 0.2% off (codegen uses no vector library now)",
    "seed881-5170": "index_put_ of an int64 value through an index into an empty dim: kiln checked the dtypes before "
                    "the indices (RuntimeError) where PyTorch raises IndexError first",
    "seed901-4712": "layer_norm of a row of equal values: its mean as sum / n was an ulp off them, and the output "
                    "3.8e-5 where eager's and torch.compile's Welford mean give exactly 0",
    "seed931-1624": "std over two axes of an expanded scalar (a dynamic size): the combined partial statistics were "
                    "2.5e-7, not 0, and the gradient 1.04 where eager's is 0 (only one reduced axis was checked for "
                    "equal elements)",
    "seed951-4040": "x2[x2 > 0] = 1 after mm(x2, x1) with x1 frozen: kiln saved x2 for a gradient nobody wanted "
                    "and its backward raised on the version change, where PyTorch saves each matrix only for the "
                    "other's gradient",
    "seed971-0251": "pow(x, zeros) whose result is sliced with a step, then its exponent changed in place past a "
                    "graph break: the compiled backward raised on the exponent eager never unpacked (its tangent was "
                    "absent), since the raw joint's slice gradient is a `full` written through copy_ into a view, "
                    "whose tangent mask ignored the write",
    "seed971-3698": "atan2(bool, x) in a graph whose output does not reach it: AOT's joint trace ran atan2's formula, "
                    "whose `-` of the bool operand raised, and the compile failed where eager's backward never runs "
                    "the formula (errors raised by any formula are now deferred to a backward that reaches them)",
    "seed971-4625": "the same for pow(x, bool exponent), whose formula's `exponent - 1` raises on a bool tensor",
    "seed981-2376": "floor(x.mean() / x) of three equal values: kiln's eager mean was the double sum times 1/3, the "
                    "value itself, where PyTorch's is the float sum over 3, an ulp below, so the floor was 1, not 0",
    "seed1041-3175": "v1[1:].split(1, 1)[-1].view(-1) compiled: split's pieces kept their meta storage offsets (row 1 "
                     "of v1 included) while the lazy v1[1:] was computed into a buffer of its own, and the view was "
                     "made past that buffer's end (reinterpret_tensor raised at run time)",
    "seed1051-1517": "v2 @ v2.expand(2, ...).chunk(2, 0)[0] compiled: the expanded value was computed densely (a graph "
                     "output) and chunk's piece read with its meta layout (stride 0, transposed): a wrong matmul",
    "seed1081-3829": "(the fuzzer's judge) remainder(x, log_softmax(x)) magnifies log_softmax's last bits 300x, "
                     "where kiln is nearer float64 than PyTorch; its backward raises in every run (the saved "
                     "output written in place), so the float64 judge refused the forward values",
    "seed1091-1528": "(the fuzzer's judge) a dead index_select out of bounds: eager PyTorch raises, compiled code "
                     "drops it, and torch.compile, asked as the reference, corrupted its heap (SIGABRT); eager "
                     "on the program without its dead statements is asked first now",
    "seed1121-0228": "x3[0] = (x3 % x2).squeeze() on an input not requiring grad, compiled: the backward raises (x3 "
                     "saved, then overwritten), and the copy-back left x3 and v1 = x3[::2] without grad where eager's "
                     "require it",
    "seed1141-4181": "x1.scatter_add(0, x1, x1).view(-1) of a transposed x1: kiln's scatter_add kept self's "
                     "column-major layout and view refused; PyTorch's structured scatter kernels (and masked_fill, "
                     "masked_scatter, index_copy) make row-major results",
    "seed1241-1584": "(-x1 // 0.5).argmin() of a float16 x1, compiled: the loader no longer asked a value read as "
                     "it is for its kernel dtype, so the float16 floor division stayed lazy and met a kernel "
                     "(NotImplementedError out of the compile) instead of running eager's kernel",
    "seed1371-1030": "int_x[0] = float requiring grad, then int_x[int_x > 0] = 1 (harness): PyTorch marks the "
                     "integer tensor as requiring grad and refuses the second write as an in-place op on a leaf; "
                     "that was taken as an oracle kiln failed",
    "seed1401-1985": "x[0] = x on an expanded input, traced with static shapes: refused as an overlapping write "
                     "(fake storages hold no data)",
}


def test_every_stored_program_has_its_bug_named():
    stored = {f[:-5] for f in os.listdir(HERE) if f.endswith(".json")}
    assert stored == set(REGRESSIONS)


@pytest.fixture(scope="module")
def results():
    names = sorted(REGRESSIONS)
    got = driver.run_programs([os.path.join(HERE, n + ".json") for n in names], BACKENDS, timeout=120)
    return {names[r["index"]]: r for r in got}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regression(results, name):
    r = results[name]
    problems = "\n".join(f"  {mode}: {p}" for mode, ps in r["failures"].items() for p in ps)
    assert r["status"] == "ok", f"{name} ({REGRESSIONS[name]}; {r['status']}):\n{problems}\n{r['detail']}\n{r['source']}"
