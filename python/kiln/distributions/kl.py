"""kl_divergence(p, q) with a registry of closed forms keyed by (type(p), type(q)), as torch's:
Normal-Normal, Categorical-Categorical, Bernoulli-Bernoulli, Uniform-Uniform (inf where q does not
cover p's support)."""

import math

import kiln
from kiln.distributions.bernoulli import Bernoulli
from kiln.distributions.categorical import Categorical
from kiln.distributions.normal import Normal
from kiln.distributions.uniform import Uniform

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}
_KL_MEMOIZE = {}


def register_kl(type_p, type_q):
    """Decorator registering `fn(p, q)` for the pair; the most specific registered pair wins for subclasses."""
    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun
    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    # the pair whose classes come first in the MROs of type_p and type_q
    best = min(matches, key=lambda pq: (type_p.__mro__.index(pq[0]), type_q.__mro__.index(pq[1])))
    return _KL_REGISTRY[best]


def kl_divergence(p, q):
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


def _softplus(x):
    return kiln.softplus(x, 1.0, 20.0)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = kiln.where((q.probs == 0).expand_as(t), math.inf, t)
    t = kiln.where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = kiln.where(q.probs == 0, math.inf, t1)
    t1 = kiln.where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = kiln.where(q.probs == 1, math.inf, t2)
    t2 = kiln.where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return kiln.where((q.low > p.low) | (q.high < p.high), math.inf, result)
