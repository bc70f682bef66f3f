"""kiln.utils._pytree against torch.utils._pytree (PyTorch 2.13): leaves in the same order, equal
spec reprs (modulo the module that defines a test class), round trips, tree_map over several trees,
tree_map_only, registration of a custom node, and the errors of mismatched trees."""

import collections
import warnings

import pytest

import kiln
import kiln.utils._pytree as kp
from conftest import requires_torch, torch

pytestmark = requires_torch

if torch is not None:
    import torch.utils._pytree as tp

Point = collections.namedtuple("Point", ["x", "y"])

TREES = [
    1,
    None,
    "leaf",
    [],
    (),
    {},
    [1, 2, 3],
    (1, (2, (3, None))),
    {"b": 1, "a": 2, "c": [3, 4]},  # insertion order, not sorted
    collections.OrderedDict(z=1, y=(2, 3)),
    Point(1, [2, 3]),
    [Point(x={"k": 1}, y=None), (), {"q": []}],
    collections.defaultdict(list, {"m": 1, "n": (2,)}),
    collections.deque([1, [2, 3]], maxlen=5),
    {1: "a", (2, 3): ["b", "c"], None: {"d": 4}},
    [[[[[1]]]], ({"x": (None, 2)},)],
]


def spec_repr(spec):
    return repr(spec).replace(__name__ + ".", "").replace("test_pytree.", "")


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_matches_torch(tree):
    k_leaves, k_spec = kp.tree_flatten(tree)
    t_leaves, t_spec = tp.tree_flatten(tree)
    assert k_leaves == t_leaves
    assert spec_repr(k_spec) == spec_repr(t_spec)
    assert (k_spec.num_leaves, k_spec.num_nodes, k_spec.num_children) == \
        (t_spec.num_leaves, t_spec.num_nodes, t_spec.num_children)
    assert k_spec.is_leaf() == t_spec.is_leaf()
    assert k_spec.context == t_spec.context
    assert kp.tree_leaves(tree) == tp.tree_leaves(tree)
    assert kp.tree_structure(tree) == k_spec
    back = kp.tree_unflatten(k_leaves, k_spec)
    assert back == tree and type(back) is type(tree)
    assert kp.tree_unflatten(k_spec, k_leaves) == tree  # torch accepts the arguments swapped
    if isinstance(tree, collections.deque):
        assert back.maxlen == tree.maxlen
    if isinstance(tree, collections.defaultdict):
        assert back.default_factory is tree.default_factory
    assert hash(k_spec) == hash(kp.tree_structure(tree))


def test_tensors_are_leaves_and_tree_map():
    x, y = kiln.ones(2), kiln.zeros(3)
    tree = {"a": x, "b": [y, (x, 1.5)], "c": None}
    leaves = kp.tree_leaves(tree)
    assert leaves[0] is x and leaves[1] is y and leaves[2] is x and leaves[3] == 1.5 and leaves[4] is None
    out = kp.tree_map_only(kiln.Tensor, lambda t: t + 1, tree)
    assert out["a"].tolist() == [2.0, 2.0] and out["b"][1][1] == 1.5 and out["c"] is None
    ints = kp.tree_map_only((int, float), lambda v: v * 2, [1, "s", (2.5, None)])
    assert ints == tp.tree_map_only((int, float), lambda v: v * 2, [1, "s", (2.5, None)])
    pred = kp.tree_map_only(lambda v: v == 2, lambda v: -v, [1, 2, [2, 3]])
    assert pred == [1, -2, [-2, 3]]
    with pytest.raises(TypeError):
        kp.tree_map_only(3, lambda v: v, [1])


def test_tree_map_several_trees_and_prefixes():
    fn = lambda x, y: [x] + y  # noqa: E731
    assert kp.tree_map(fn, [5, 6], [[7, 9], [1, 2]]) == tp.tree_map(fn, [5, 6], [[7, 9], [1, 2]])
    add = lambda a, b: a + b  # noqa: E731
    a = {"x": 1, "y": (2, 3)}
    b = collections.OrderedDict(y=(20, 30), x=10)  # dict kinds are compatible, keys looked up by name
    assert kp.tree_map(add, a, b) == tp.tree_map(add, a, b)
    assert kp.tree_map(lambda v: v is None, {"x": 7, "z": None}) == {"x": False, "z": True}
    assert kp.tree_map(lambda v: v, [1, 2], is_leaf=lambda n: isinstance(n, list)) == [1, 2]
    seen = []
    kp.tree_map_(seen.append, [1, (2, 3)])
    assert seen == [1, 2, 3]
    assert kp.tree_all(lambda v: v > 0, [1, (2, 3)]) and not kp.tree_any(lambda v: v > 5, [1, (2, 3)])


@pytest.mark.parametrize("tree, other", [
    ([1, 2], (1, 2)),                       # node type
    ([1, 2], [1, 2, 3]),                    # arity
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}),   # keys
    (Point(1, 2), collections.namedtuple("Other", ["x", "y"])(1, 2)),  # namedtuple class
])
def test_mismatch_errors(tree, other):
    with pytest.raises(Exception) as want:
        tp.tree_map(lambda a, b: a, tree, other)
    with pytest.raises(Exception) as got:
        kp.tree_map(lambda a, b: a, tree, other)
    assert type(got.value) is type(want.value)
    assert str(got.value).replace("test_pytree.", "") == str(want.value).replace("test_pytree.", "")


def test_unflatten_errors():
    spec = kp.tree_structure([1, (2, 3)])
    with pytest.raises(ValueError, match="has length 2 but the spec refers to a pytree that holds 3 items"):
        kp.tree_unflatten([1, 2], spec)
    with pytest.raises(TypeError):
        kp.tree_unflatten([1], [2])


def test_leaf_spec_and_equality():
    assert repr(kp.treespec_leaf()) == "*" and kp.treespec_leaf().is_leaf()
    assert isinstance(kp.LeafSpec(), kp.TreeSpec)
    assert kp.tree_structure([1, 2]) == kp.tree_structure(["a", None])
    assert kp.tree_structure([1, 2]) != kp.tree_structure((1, 2))
    assert kp.tree_structure({"a": 1, "b": 2}) != kp.tree_structure({"b": 1, "a": 2})
    assert kp.tree_structure([1, [2]]).child(1) == kp.tree_structure([3])
    assert kp.tree_structure(Point(1, 2)).context is Point


class Box:
    def __init__(self, items, tag):
        self.items, self.tag = items, tag


def _box_flatten(b):
    return list(b.items), b.tag


def _box_unflatten(values, tag):
    return Box(list(values), tag)


def test_register_pytree_node():
    kp.register_pytree_node(Box, _box_flatten, _box_unflatten)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if Box not in tp.SUPPORTED_NODES:
            tp.register_pytree_node(Box, _box_flatten, _box_unflatten)
    tree = {"box": Box([1, (2, 3)], "t"), "n": 4}
    k_leaves, k_spec = kp.tree_flatten(tree)
    t_leaves, t_spec = tp.tree_flatten(tree)
    assert k_leaves == t_leaves == [1, 2, 3, 4]
    assert spec_repr(k_spec) == spec_repr(t_spec)
    back = kp.tree_unflatten([10, 20, 30, 40], k_spec)
    assert back["box"].items == [10, (20, 30)] and back["box"].tag == "t" and back["n"] == 40
    with pytest.raises(ValueError, match="already registered"):
        kp.register_pytree_node(Box, _box_flatten, _box_unflatten)
    with pytest.raises(ValueError, match="Node context mismatch"):
        kp.tree_map(lambda a, b: a, tree, {"box": Box([1, (2, 3)], "other"), "n": 4})
