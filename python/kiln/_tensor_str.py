"""How tensors print: PyTorch's layout (precision 4, int/fixed/scientific modes chosen from the
values, rows wrapped at 80 columns, tensors over 1000 elements summarised with 3 edge items per
dimension), with `kiln.` dtype names in the suffixes."""

import math

PRINT_OPTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    if profile == "default":
        PRINT_OPTS.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        PRINT_OPTS.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        PRINT_OPTS.update(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("linewidth", linewidth)):
        if value is not None:
            PRINT_OPTS[key] = value
    PRINT_OPTS["sci_mode"] = sci_mode


class _Summary:
    """Stands for the elided middle of a summarised dimension."""


def _collect(data, depth, ndim, summarize, values):
    """Nested lists with the middle of long dims replaced by _Summary; gathers the shown values."""
    if depth == ndim:
        values.append(data)
        return data
    edge = PRINT_OPTS["edgeitems"]
    if summarize and len(data) > 2 * edge:
        items = data[:edge] + [_Summary] + data[-edge:]
    else:
        items = data
    return [x if x is _Summary else _collect(x, depth + 1, ndim, summarize, values) for x in items]


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        precision = PRINT_OPTS["precision"]
        if not floating:
            for v in values:
                self.width = max(self.width, len(str(v)))
            return
        # As PyTorch: only the nonzero finite values choose the mode and the width; zeros, infs and
        # NaNs are padded to it (so [0., -0.] prints without padding, and with no such value the
        # print options' sci_mode is not consulted).
        finite = [v for v in values if math.isfinite(v) and v != 0]
        if not finite:
            return
        lo, hi = min(abs(v) for v in finite), max(abs(v) for v in finite)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        forced = PRINT_OPTS["sci_mode"]
        self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) if forced is None else forced
        for v in finite:
            if self.sci_mode:
                text = f"{v:.{precision}e}"
            elif self.int_mode:
                text = f"{v:.0f}."
            else:
                text = f"{v:.{precision}f}"
            self.width = max(self.width, len(text))

    def _raw(self, v):
        precision = PRINT_OPTS["precision"]
        if not self.floating:
            return str(v)
        if self.sci_mode:
            return f"{v:.{precision}e}"
        if self.int_mode:
            text = f"{v:.0f}"
            return text if math.isinf(v) or math.isnan(v) else text + "."
        return f"{v:.{precision}f}"

    def format(self, v):
        return self._raw(v).rjust(self.width)


class _ComplexFormatter:
    """PyTorch's complex layout: the real parts and the imaginary parts each formatted as a real
    tensor's values are, joined as `1.+2.j` (the sign of the imaginary part replaces the `+`)."""

    def __init__(self, values):
        self.real = _Formatter([v.real for v in values], True)
        self.imag = _Formatter([v.imag for v in values], True)
        self.width = self.real.width + self.imag.width + 1  # the `j`; _render adds the separator

    def format(self, v):
        real = self.real.format(v.real)
        imag = (self.imag.format(v.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _render(data, depth, ndim, indent, fmt):
    if ndim == 0:
        return fmt.format(data)
    if depth == ndim - 1:
        per_line = max(1, int(math.floor((PRINT_OPTS["linewidth"] - indent) / (fmt.width + 2))))
        items = [" ..." if x is _Summary else fmt.format(x) for x in data]
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = ["..." if x is _Summary else _render(x, depth + 1, ndim, indent + 1, fmt) for x in data]
    sep = "," + "\n" * (ndim - depth - 1) + " " * (indent + 1)
    return "[" + sep.join(rows) + "]"


def _add_suffixes(text, suffixes, indent):
    out = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > PRINT_OPTS["linewidth"]:
            out.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            out.append(", " + suffix)
            last_line += len(suffix) + 2
    out.append(")")
    return "".join(out)


def tensor_repr(t, prefix="tensor("):
    import kiln

    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = kiln.get_default_dtype()
    # the default complex dtype (complex64 for float32) prints without a suffix too
    default_complex = {kiln.float32: kiln.complex64, kiln.float64: kiln.complex128}.get(default)
    default_dtypes = (default, default_complex, kiln.int64, kiln.bool)
    if t.device.type == "meta" or kiln._C._is_fake(t):  # no data to show
        body = "..."
        suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype != kiln.get_default_dtype():
            suffixes.append("dtype=" + repr(t.dtype))
    elif t.numel() == 0:
        body = "[]"
        if t.dim() != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype != kiln.get_default_dtype():
            suffixes.append("dtype=" + repr(t.dtype))
    else:
        if t.dtype not in default_dtypes:
            suffixes.append("dtype=" + repr(t.dtype))
        summarize = t.numel() > PRINT_OPTS["threshold"]
        source = t.detach()
        if source.device.type == "cuda":  # one copy to the host, not one per printed element
            source = source.cpu()
        values = []
        data = _collect(_summarized_list(source, summarize), 0, t.dim(), summarize, values)
        fmt = _ComplexFormatter(values) if t.dtype.is_complex else _Formatter(values, t.dtype.is_floating_point)
        body = _render(data, 0, t.dim(), indent, fmt)
    grad_fn = getattr(t, "grad_fn", None)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif getattr(t, "requires_grad", False):
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


def _summarized_list(t, summarize):
    """tolist() of t, reading only the edge items of each dim when summarising (big tensors)."""
    if not summarize or t.dim() == 0:
        return t.tolist()
    edge = PRINT_OPTS["edgeitems"]
    n = t.shape[0]
    if n > 2 * edge:
        rows = [t[i] for i in range(edge)] + [t[i] for i in range(n - edge, n)]
        if t.dim() == 1:
            return [r.item() for r in rows[:edge]] + _padding(n - 2 * edge) + [r.item() for r in rows[edge:]]
        return [_summarized_list(r, True) for r in rows[:edge]] + _padding(n - 2 * edge) + \
            [_summarized_list(r, True) for r in rows[edge:]]
    if t.dim() == 1:
        return t.tolist()
    return [_summarized_list(t[i], True) for i in range(n)]


def _padding(n):
    # Placeholders keep the list length equal to the dim, so _collect elides the same middle.
    return [0] * n
