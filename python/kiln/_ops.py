"""kiln.ops.aten.<op>.<overload>: OpOverload and OpOverloadPacket objects over the op registry.

    >>> kiln.ops.aten.add.Tensor(x, y)      # one overload
    >>> kiln.ops.aten.add._schema
    add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
"""

import copyreg
import functools

from kiln import _C


class FunctionSchema:
    """The parsed schema of one overload; str() gives the schema text, `arguments` and `returns`
    the registry's typed arguments (name, type, alias_info: torch._C.Argument's)."""

    def __init__(self, text, full_name=None):
        self._text = text
        self._full_name = full_name
        head = text.split("(", 1)[0]
        self.name, _, self.overload_name = (head if "::" in head else "aten::" + head).partition(".")

    @functools.cached_property
    def arguments(self):  # read once: the registry's schemas never change (Inductor asks per node)
        return _C._schema_arguments(self._full_name)

    @functools.cached_property
    def returns(self):
        return _C._schema_returns(self._full_name)

    def __str__(self):
        return self._text

    __repr__ = __str__


class OpOverload:
    def __init__(self, packet, overload_name):
        self._overloadpacket = packet
        self._overloadname = overload_name or "default"
        full = packet._qualified_name + ("." + overload_name if overload_name else "")
        self._full_name = full
        self._op = _C._overload_function(full)
        self._schema = FunctionSchema(_C._schema(full), full)
        self.__name__ = f"{packet.__name__}.{self._overloadname}"
        self.__qualname__ = self._full_name
        self._text = packet._qualified_name.replace("::", ".") + "." + self._overloadname  # str(): Inductor's names

    @property
    def overloadpacket(self):
        return self._overloadpacket

    @property
    def tags(self):
        return [getattr(Tag, t) for t in _C._tags(self._full_name)]

    @property
    def cost_class(self):
        """What recomputing this op costs, from the registry (Note [Op cost classes] in
        tensor/dispatcher.h): "free" (views), "memory_bound" (pointwise ops, reductions, copies,
        factories), "compute_intensive" (matmuls, convolutions, attention) or "opaque"."""
        return _C._cost_class(self._full_name)

    def name(self):
        return self._full_name if "." in self._full_name else self._full_name + ".default"

    def has_outer_reduction_kernel(self, dtype):
        """Whether its CPU kernel reduces dimensions outer to the kept ones by whole rows for results
        of `dtype` (kiln only; Note [Outer reduction kernels] in tensor/dispatcher.h): Inductor
        leaves such a reduction to it."""
        return _C._has_outer_reduction_kernel(self._full_name, dtype)

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='{self._overloadpacket._qualified_name.replace('::', '.')}', overload='{self._overloadname}')>"

    def __str__(self):
        return self._text

    def __hash__(self):
        return hash(self._full_name)

    def __eq__(self, other):
        return isinstance(other, OpOverload) and other._full_name == self._full_name


class OpOverloadPacket:
    def __init__(self, qualified_name):
        self._qualified_name = qualified_name
        self.__name__ = qualified_name.split("::")[1]
        self._op = _C._packet_function(qualified_name)
        self._overload_names = _C._overload_names(qualified_name)
        self._cache = {}

    def overloads(self):
        return [n or "default" for n in self._overload_names]

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        key = "" if name == "default" else name
        if key not in self._overload_names:
            # an overload defined since (kiln.library's FRAGMENT libraries add to a namespace)
            self._overload_names = _C._overload_names(self._qualified_name)
        if key not in self._overload_names:
            raise AttributeError(f"The underlying op of '{self}' has no overload name '{name}'")
        if key not in self._cache:
            self._cache[key] = OpOverload(self, key)
        # later lookups find the attribute itself, without this method: `aten.add.Tensor` in a
        # per-node loop cost two Python calls per node
        object.__setattr__(self, name, self._cache[key])
        return self._cache[key]

    @property
    def _schema(self):
        return self.default._schema if "" in self._overload_names else getattr(self, self._overload_names[0])._schema

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self._qualified_name.replace('::', '.')}')>"

    def __str__(self):
        return self._qualified_name.replace("::", ".")


@functools.lru_cache(maxsize=None)
def _dunder_ops():
    return frozenset(q for q, name, _ in _C._packets() if name.startswith("__"))


class _OpNamespace:
    def __init__(self, name):
        self._name = name
        self._packets = {}

    def __getattr__(self, op_name):
        # Python's own protocol probes (__deepcopy__, __getstate__, ...) are no ops; aten's dunder
        # operators (__lshift__, __irshift__) are
        if op_name.startswith("__") and not (op_name.endswith("__") and op_name.strip("_").isalpha() and
                                             f"{self._name}::{op_name}" in _dunder_ops()):
            raise AttributeError(op_name)
        packet = self._packets.get(op_name)
        if packet is None:
            qualified = f"{self._name}::{op_name}"
            try:
                packet = OpOverloadPacket(qualified)
            except AttributeError:
                raise AttributeError(f"'_OpNamespace' '{self._name}' object has no attribute '{op_name}'") from None
            self._packets[op_name] = packet
        object.__setattr__(self, op_name, packet)  # later lookups skip this method
        return packet


class _Ops:
    """kiln.ops: `aten`, and a namespace for each library of operators defined in Python
    (kiln.library), made on first use as torch.ops does."""

    def __init__(self):
        self.aten = _OpNamespace("aten")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        namespace = _OpNamespace(name)
        object.__setattr__(self, name, namespace)
        return namespace


def overload_named(full_name):
    """The OpOverload of a registry name: "aten::add.Tensor" -> kiln.ops.aten.add.Tensor,
    "aten::exp" -> kiln.ops.aten.exp.default, "mylib::foo" -> kiln.ops.mylib.foo.default (the
    names the C++ side hands out)."""
    namespace, name = full_name.split("::", 1)
    packet, _, overload = name.partition(".")
    return getattr(getattr(getattr(ops, namespace), packet), overload or "default")


class Tag:
    """Op tags, as in torch.Tag."""

    pointwise = "pointwise"
    reduction = "reduction"
    view = "view"
    inplace = "inplace"
    nondeterministic_seeded = "nondeterministic_seeded"
    core = "core"
    data_dependent_output = "data_dependent_output"
    dynamic_output_shape = "dynamic_output_shape"
    inplace_view = "inplace_view"
    compute_intensive = "compute_intensive"  # kiln's: matmuls, convolutions, attention


ops = _Ops()


def _reduce_op_function(fn):
    """An op function (kiln.tanh, ...) is a singleton, as torch's builtins: copy and deepcopy return it
    (a module holding one, say TransformerEncoderLayer(activation=kiln.tanh), deep-copies) and pickle
    stores it by name. Its pybind11 type is immutable, so this goes through copyreg."""
    return fn.__name__


copyreg.pickle(_C._OpFunction, _reduce_op_function)
