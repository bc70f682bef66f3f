"""kiln._dynamo.source: where a value came from, relative to the frame.

A Source names a value by the path that reaches it from the frame's locals (L) or globals (G):
`L['self']._modules['fc']._parameters['weight']`. The same path serves three uses: the guard tree
walks it (guard_manager), the generated code reloads it (expr), and logs print it (name).
"""

import functools
import re


class Source:
    def name(self):
        raise NotImplementedError

    def expr(self, codegen):
        """A Python expression for this value inside the generated function."""
        raise NotImplementedError

    def guard_manager(self, builder):
        """The guard-tree node for this value (GuardBuilder memoises per source)."""
        raise NotImplementedError

    def reachable(self):
        """Whether the guard tree can walk to it from the frame's locals or globals."""
        return True

    def __eq__(self, other):
        return type(self) is type(other) and self.name() == other.name()

    def __hash__(self):
        return hash(self.name())

    def __repr__(self):
        return self.name()


class LocalSource(Source):
    def __init__(self, local_name):
        self.local_name = local_name

    def name(self):
        return f"L[{self.local_name!r}]"

    def expr(self, codegen):
        return self.local_name

    def guard_manager(self, builder):
        return builder.root.dict_getitem_manager(self.local_name, self.name())


class GlobalSource(Source):
    def __init__(self, global_name):
        self.global_name = global_name

    def name(self):
        return f"G[{self.global_name!r}]"

    def expr(self, codegen):
        return codegen.global_expr(self.global_name)

    def guard_manager(self, builder):
        return builder.globals_manager().dict_getitem_manager(self.global_name, self.name())


class AttrSource(Source):
    def __init__(self, base, member):
        self.base, self.member = base, member
        self._name = None

    def name(self):  # made once: a deep path's name was rebuilt from its root at every use
        if self._name is None:
            self._name = f"{self.base.name()}.{self.member}"
        return self._name

    def expr(self, codegen):
        return f"{self.base.expr(codegen)}.{self.member}"

    def guard_manager(self, builder):
        return builder.manager(self.base).getattr_manager(self.member, self.name())

    def reachable(self):
        return self.base.reachable()


class GetItemSource(Source):
    """base[index]: a dict entry (is_dict) or a tuple/list element."""

    def __init__(self, base, index, is_dict=False):
        self.base, self.index, self.is_dict = base, index, is_dict
        self._name = None

    def name(self):
        if self._name is None:
            self._name = f"{self.base.name()}[{self.index!r}]"
        return self._name

    def expr(self, codegen):
        return f"{self.base.expr(codegen)}[{self.index!r}]"

    def guard_manager(self, builder):
        base = builder.manager(self.base)
        if self.is_dict:
            return base.dict_getitem_manager(self.index, self.name())
        return base.getitem_manager(self.index, self.name())

    def reachable(self):
        return self.base.reachable()


def graph_input_name(source):
    """The placeholder name PyTorch gives a graph input: L['self']._modules['fc'] -> l_self_modules_fc_."""
    return _graph_input_name(source.name())


@functools.lru_cache(maxsize=4096)
def _graph_input_name(text):
    # runs of characters other than letters and digits become one "_" (str.isalnum's letters and
    # digits are the regex's word characters less "_"); non-ASCII text is lowered one character at a
    # time (a whole-string lower() turns a final capital sigma into the final form)
    name = _NOT_ALNUM.sub("_", text)
    name = name.lower() if name.isascii() else "".join(ch.lower() for ch in name)
    name = name.strip("_") + "_"
    return name if not name[0].isdigit() else "_" + name


_NOT_ALNUM = re.compile(r"[\W_]+")