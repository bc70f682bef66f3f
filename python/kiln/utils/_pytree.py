"""kiln.utils._pytree: nested containers as (leaves, TreeSpec), as torch.utils._pytree.

A pytree is a leaf or a node. A node is an instance of a registered container type (list, tuple,
dict, namedtuple, OrderedDict, defaultdict and deque are built in; `register_pytree_node` adds more);
anything else, None included, is a leaf. `tree_flatten` walks a tree depth first, left to right
(dicts in insertion order, as torch), collecting leaves and building a `TreeSpec`: the node's type,
its context (dict keys, the namedtuple class, ...) and one child spec per child. `tree_unflatten`
rebuilds the tree from the spec and a list of leaves.

Invariants of a TreeSpec: a leaf spec has type None, context None and no children; `num_leaves` and
`num_nodes` count the whole subtree; specs compare equal when types (by name), contexts and children
are equal. All namedtuple classes share the node type `namedtuple`, their class kept as the context.
"""

import functools
import types
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, NamedTuple

__all__ = [
    "PyTree", "TreeSpec", "LeafSpec", "register_pytree_node", "treespec_leaf", "tree_flatten", "tree_unflatten",
    "tree_iter", "tree_leaves", "tree_structure", "tree_map", "tree_map_", "map_only", "tree_map_only",
    "tree_all", "tree_any", "tree_is_leaf", "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance",
]

PyTree = Any


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Any
    unflatten_fn: Any


SUPPORTED_NODES = {}


def _register(cls, flatten_fn, unflatten_fn):
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn)


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Registers `cls` as a node: `flatten_fn(x) -> (children, context)`,
    `unflatten_fn(children, context) -> x`. The serialization arguments are accepted and unused."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    if (to_dumpable_context is None) ^ (from_dumpable_context is None):
        raise ValueError(f"Both to_dumpable_context and from_dumpable_context for {cls} must be None or registered.")
    _register(cls, flatten_fn, unflatten_fn)


def is_namedtuple_class(cls):
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)
            and all(type(field) is str for field in cls._fields)
            and callable(getattr(cls, "_make", None)) and callable(getattr(cls, "_asdict", None)))


def is_namedtuple(obj):
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_namedtuple_instance(obj):
    return is_namedtuple_class(type(obj))


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values, strict=True))


def _defaultdict_flatten(d):
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_unflatten(values, context):
    default_factory, keys = context
    return defaultdict(default_factory, _dict_unflatten(values, keys))


_register(tuple, lambda t: (list(t), None), lambda values, _: tuple(values))
_register(list, lambda lst: (lst, None), lambda values, _: list(values))
_register(dict, _dict_flatten, _dict_unflatten)
_register(namedtuple, lambda t: (list(t), type(t)), lambda values, cls: cls(*values))
_register(OrderedDict, _dict_flatten, lambda values, keys: OrderedDict(zip(keys, values, strict=True)))
_register(defaultdict, _defaultdict_flatten, _defaultdict_unflatten)
_register(deque, lambda d: (list(d), d.maxlen), lambda values, maxlen: deque(values, maxlen=maxlen))

_STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})
_BUILTIN_TYPES = frozenset({tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque})


def _get_node_type(tree):
    node_type = type(tree)
    return namedtuple if is_namedtuple_class(node_type) else node_type


def tree_is_leaf(tree, is_leaf=None):
    if is_leaf is not None and is_leaf(tree):
        return True
    return _get_node_type(tree) not in SUPPORTED_NODES


class TreeSpec:
    """The structure of a pytree: `type` (None for a leaf), `context`, and child specs."""

    __slots__ = ("type", "_context", "_children", "num_nodes", "num_leaves", "num_children")

    def __init__(self, type, context, children_specs):
        self.type = type
        self._context = context
        self._children = children_specs
        if type is None:
            if context is not None:
                raise AssertionError("leaf node should not have a context")
            if len(children_specs) != 0:
                raise AssertionError("leaf node should not have children")
            self.num_nodes, self.num_leaves = 1, 1
        else:
            self.num_nodes = 1 + sum(c.num_nodes for c in children_specs)
            self.num_leaves = sum(c.num_leaves for c in children_specs)
        self.num_children = len(children_specs)

    def __repr__(self, indent=0):
        if self.type is None:
            return "*"
        children = ""
        if self.num_children > 0:
            indent += 2
            children = self._children[0].__repr__(indent)
            children += "," if self.num_children > 1 else ""
            children += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self._children[1:])
        return f"TreeSpec({self.type.__name__}, {self._context}, [{children}])"

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (str(self.type) == str(other.type) and self._context == other._context
                and self._children == other._children)

    def __hash__(self):
        context = self._context
        if self.type is defaultdict:
            context = (context[0], tuple(context[1]))
        elif self.type in (dict, OrderedDict):
            context = tuple(context)
        elif self.type is not None and self.type not in _BUILTIN_TYPES:
            context = None  # a user context may be unhashable; equal specs still hash equal
        return hash((self.type, context, tuple(self._children)))

    @property
    def context(self):
        return self._context

    @property
    def children_specs(self):
        return self._children

    def is_leaf(self):
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self):
        return self._children.copy()

    def child(self, index):
        return self._children[index]

    def flatten_up_to(self, tree):
        """The subtrees of `tree` at this spec's leaves (`tree` must have this spec as a prefix)."""
        subtrees = []
        self._flatten_up_to(tree, subtrees)
        return subtrees

    def _flatten_up_to(self, node, subtrees):
        if self.is_leaf():
            subtrees.append(node)
            return
        node_type = _get_node_type(node)
        if self.type not in _BUILTIN_TYPES:
            if node_type != self.type:
                raise ValueError(f"Type mismatch; expected {self.type!r}, but got {node_type!r}.")
            children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
            if len(children) != self.num_children:
                raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
            if context != self._context:
                raise ValueError(f"Node context mismatch for custom node type {self.type!r}.")
        else:
            both_dicts = self.type in _STANDARD_DICT_TYPES and node_type in _STANDARD_DICT_TYPES
            if not both_dicts and node_type != self.type:
                raise ValueError(f"Node type mismatch; expected {self.type!r}, but got {node_type!r}.")
            if len(node) != self.num_children:
                raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(node)}.")
            if both_dicts:
                keys = self._context if self.type is not defaultdict else self._context[1]
                got, expected = set(node), set(keys)
                if got != expected:
                    message = ""
                    if expected - got:
                        message += f"; missing key(s): {expected - got}"
                    if got - expected:
                        message += f"; extra key(s): {got - expected}"
                    raise ValueError(f"Node keys mismatch{message}.")
                children = [node[key] for key in keys]
            else:
                children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
                if node_type is not deque and context != self._context:
                    raise ValueError(f"Node context mismatch for node type {self.type!r}; "
                                     f"expected {self._context!r}, but got {context!r}.")
        for subtree, subspec in zip(children, self._children, strict=True):
            subspec._flatten_up_to(subtree, subtrees)

    def unflatten(self, leaves):
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
                             f"to a pytree that holds {self.num_leaves} items ({self}).")
        if self.is_leaf():
            return leaves[0]
        start, children = 0, []
        for child in self._children:
            children.append(child.unflatten(leaves[start:start + child.num_leaves]))
            start += child.num_leaves
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self._context)


class LeafSpec(TreeSpec):
    __slots__ = ()

    def __init__(self):
        super().__init__(None, None, [])


_LEAF_SPEC = LeafSpec()


def treespec_leaf():
    return _LEAF_SPEC


def tree_flatten(tree, is_leaf=None):
    """(leaves depth first, left to right; the TreeSpec that rebuilds `tree` from them)."""
    leaves = []

    def helper(node):
        if tree_is_leaf(node, is_leaf=is_leaf):
            leaves.append(node)
            return _LEAF_SPEC
        node_type = _get_node_type(node)
        children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
        return TreeSpec(node_type, context, [helper(child) for child in children])

    spec = helper(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        if not isinstance(leaves, TreeSpec):
            raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of type "
                            f"{type(treespec)}.")
        leaves, treespec = treespec, leaves  # torch accepts the arguments swapped
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    if tree_is_leaf(tree, is_leaf=is_leaf):
        yield tree
    else:
        children, _ = SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)
        for child in children:
            yield from tree_iter(child, is_leaf=is_leaf)


def tree_leaves(tree, is_leaf=None):
    return list(tree_iter(tree, is_leaf=is_leaf))


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf=is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """`func` applied leafwise; the structure is `tree`'s, and each of `rests` must have it as a prefix."""
    leaves, treespec = tree_flatten(tree, is_leaf=is_leaf)
    flat_args = [leaves] + [treespec.flatten_up_to(r) for r in rests]
    return treespec.unflatten(map(func, *flat_args))


def tree_map_(func, tree, *rests, is_leaf=None):
    leaves, treespec = tree_flatten(tree, is_leaf=is_leaf)
    flat_args = [leaves] + [treespec.flatten_up_to(r) for r in rests]
    deque(map(func, *flat_args), maxlen=0)
    return tree


def map_only(type_or_types_or_pred, /):
    """Decorator: the function applies to leaves of the given type(s) or predicate, others pass through."""
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        def pred(x):
            return isinstance(x, type_or_types_or_pred)
    elif callable(type_or_types_or_pred):
        pred = type_or_types_or_pred
    else:
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrapper(func):
        @functools.wraps(func)
        def wrapped(x):
            return func(x) if pred(x) else x
        return wrapped

    return wrapper


def tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None):
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_iter(tree, is_leaf=is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_iter(tree, is_leaf=is_leaf)))
