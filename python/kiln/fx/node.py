"""kiln.fx.Node: one operation of an FX graph (the bound C++ fx::Node), plus map_arg.

A node's opcode is one of placeholder, get_attr, call_function, call_method, call_module and
output. Its args/kwargs may hold other nodes anywhere inside tuples, lists, dicts and slices;
`users` is kept in sync by every edit (fx/graph.h states the invariants). `meta` is a dict-like
view onto the C++ node's meta store: tensors, SymInts, numbers, strings and tuples of them are
visible to C++ passes; any other value is stored as the very object you put there.
"""

from collections.abc import MutableMapping

from kiln._C import _fx

Node = _fx.Node

# Calls that have side effects beyond their result: dead-code elimination keeps them.
_side_effectful_functions = set()


def has_side_effect(fn):
    """Marks `fn` as side-effectful, so eliminate_dead_code never removes calls to it."""
    _side_effectful_functions.add(fn)
    return fn


class _NodeMeta(MutableMapping):
    __slots__ = ("_node",)

    def __init__(self, node):
        self._node = node

    def __getitem__(self, key):
        return self._node._meta_get(key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"node.meta keys must be str, got {type(key).__name__}")
        self._node._meta_set(key, value)

    def __delitem__(self, key):
        self._node._meta_del(key)

    def __iter__(self):
        return iter(self._node._meta_keys())

    def __len__(self):
        return len(self._node._meta_keys())

    def __contains__(self, key):
        return isinstance(key, str) and self._node._meta_has(key)

    def get(self, key, default=None):
        # Mapping.get catches __getitem__'s KeyError, which crosses the binding as a C++
        # exception: a missing key cost 6.5 us, and AOT's retrace asks each node for three keys it
        # mostly lacks (issue 19); one look-up, with no list of the keys made
        if not isinstance(key, str):
            return default
        return self._node._meta_get_or(key, default)

    def copy(self):
        return dict(self)

    def __repr__(self):
        return repr(dict(self))


def _get_meta(self):
    return _NodeMeta(self)


def _set_meta(self, value):
    for key in list(self._meta_keys()):
        self._meta_del(key)
    for key, v in dict(value).items():
        self._meta_set(key, v)


def _replace_all_uses_with(self, replace_with, delete_user_cb=None, *, propagate_meta=False):
    """Points every user of this node (those `delete_user_cb(user)` accepts) at `replace_with`.

    Returns the list of users changed. With propagate_meta, replace_with takes this node's meta
    (it must have none of its own)."""
    if propagate_meta:
        if len(replace_with.meta):
            raise RuntimeError("Called node.replace_all_uses_with(replace_with, propagate_meta=True), "
                               "but replace_with already has .meta keys")
        for k, v in self.meta.items():
            replace_with.meta[k] = v
    return self._replace_all_uses_with(replace_with, delete_user_cb)


def _is_impure(self):
    if self._is_impure_op():
        return True
    if self.op == "call_function":
        return self.target in _side_effectful_functions
    if self.op == "call_module":
        graph = self.graph
        root = getattr(graph, "owning_module", None) if graph is not None else None
        if root is not None:
            try:
                return bool(getattr(root.get_submodule(self.target), "_is_impure", False))
            except AttributeError:
                return False
    return False


def _format_node(self, placeholder_names=None, maybe_return_typename=None):
    return self._format()


def _stack_trace(self):
    return self.meta.get("stack_trace")


def _set_stack_trace(self, trace):
    self.meta["stack_trace"] = trace


Node.meta = property(_get_meta, _set_meta)
Node.replace_all_uses_with = _replace_all_uses_with
Node.is_impure = _is_impure
Node.format_node = _format_node
Node.stack_trace = property(_stack_trace, _set_stack_trace)
Node.__str__ = Node.__repr__
Node.__module__ = "kiln.fx"


def map_aggregate(a, fn):
    """Applies fn to every leaf of a nested tuple/list/dict/slice structure."""
    t = type(a)
    if t is tuple:  # the common containers by exact type first: this runs for every argument
        return tuple([map_aggregate(x, fn) for x in a])
    if t is list:
        return [map_aggregate(x, fn) for x in a]
    if t in _LEAVES:
        return fn(a)
    if isinstance(a, tuple):
        t = tuple([map_aggregate(x, fn) for x in a])
        return t if not hasattr(a, "_fields") else type(a)(*t)
    if isinstance(a, list):
        return [map_aggregate(x, fn) for x in a]
    if isinstance(a, dict):
        mapped = ((k, map_aggregate(v, fn)) for k, v in a.items())
        return dict(mapped) if type(a) is dict else type(a)(mapped)  # dict subclasses kept
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


_LEAVES = frozenset({Node, int, float, bool, str, type(None)})


def map_arg(a, fn):
    """Applies fn to every Node inside a nested argument structure."""
    if not callable(fn):
        raise TypeError("kiln.fx.map_arg(a, fn): fn must be a callable")
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)
