"""NNModuleVariable: a kiln.nn.Module reached from the frame.

Modules are inlined, never left as call_module nodes: calling one inlines Module.__call__ (so
hooks behave as in eager) and its forward, attribute reads resolve as Module.__getattr__ does
(instance dict, then _parameters, _buffers and _modules), and parameters and buffers become graph
inputs with sources like L['self']._modules['fc']._parameters['weight']. The module itself is
guarded on its type; every attribute the trace read is guarded through its own source.

Note [Module walks at trace time]: `parameters()`, `named_parameters()`, `buffers()` and
`named_buffers()` (Module's own, not overrides) are answered from the module tree while tracing, as
PyTorch's NNModuleVariable does: an iterator over the tensors, each a graph input through its path
(`..._modules['rnn']._parameters['weight_ih_l0']`). So `next(self.parameters())` (word_language_model's
init_hidden) compiles. Its tensors are guarded like any attribute read; a tensor added to the tree
after compiling is not seen (as in PyTorch, whose guards on the tree are also partial).
"""

from kiln._dynamo.exc import unimplemented
from kiln._dynamo.source import AttrSource, GetItemSource
from kiln._dynamo.variables.base import BoundMethodVariable, ConstantVariable, ObjectVariable
from kiln._dynamo.variables.misc import object_getattr
from kiln.nn.modules.module import Module


# method -> (the table it walks, whether it yields (name, tensor) pairs); Note [Module walks at trace time]
_MEMBER_WALKS = {"parameters": ("_parameters", False), "named_parameters": ("_parameters", True),
                 "buffers": ("_buffers", False), "named_buffers": ("_buffers", True)}


def _walk_members(module, table, prefix, recurse, remove_duplicate):
    """(qualified name, tensor, path from the module) as Module._named_members yields them."""
    modules, seen_modules = [], set()

    def visit(m, name, path):
        if remove_duplicate and id(m) in seen_modules:
            return
        seen_modules.add(id(m))
        modules.append((name, m, path))
        if recurse:
            for child_name, child in m.__dict__["_modules"].items():
                if child is not None:
                    visit(child, name + ("." if name else "") + child_name, path + (("_modules", child_name),))

    visit(module, prefix, ())
    seen = set()
    for name, m, path in modules:
        for key, value in m.__dict__[table].items():
            if value is None or (remove_duplicate and id(value) in seen):
                continue
            seen.add(id(value))
            yield name + ("." if name else "") + key, value, path + ((table, key),)


class NNModuleVariable(ObjectVariable):
    def describe(self):
        return f"module {type(self.value).__name__}"

    def _sub(self, *path):
        if self.source is None:
            return None
        source = self.source
        for step in path:
            source = AttrSource(source, step) if isinstance(step, str) else GetItemSource(source, step[0], is_dict=True)
        return source

    def var_getattr(self, tx, name):
        from kiln._dynamo.variables.builder import wrap

        stored = tx.output.side_effects.load_attr(self.value, name)
        if stored is not None:  # written earlier in this trace (replayed after the graph)
            return stored
        d = self.value.__dict__
        cls_attr = getattr(type(self.value), name, None)
        if name in d and not hasattr(cls_attr, "__set__"):
            return wrap(tx, d[name], self._sub("__dict__", (name,)))
        for table in ("_parameters", "_buffers", "_modules"):
            entries = d.get(table)
            if entries is not None and name in entries:
                return wrap(tx, entries[name], self._sub(table, (name,)))
        if name in _MEMBER_WALKS and cls_attr is getattr(Module, name):
            return BoundMethodVariable(self, name)
        return object_getattr(tx, self, self.value, name)

    def has_attr(self, tx, name):
        return tx.output.side_effects.has_attr(self.value, name) or hasattr(self.value, name)

    def call_function(self, tx, args, kwargs):
        from kiln._dynamo.variables.functions import UserFunctionVariable

        call = type(self.value).__call__
        if not hasattr(call, "__code__"):
            unimplemented(f"module {type(self.value).__name__} has a non-Python __call__")
        return UserFunctionVariable(call).call_function(tx, [self] + list(args), kwargs)

    def call_method(self, tx, name, args, kwargs):
        if name in _MEMBER_WALKS and getattr(type(self.value), name) is getattr(Module, name):
            return self._walk(tx, name, args, kwargs)
        if name in ("parameters", "named_parameters", "buffers", "modules", "children", "named_modules",
                    "named_children", "state_dict"):
            unimplemented(f"Module.{name}() inside a compiled function",
                          "call it outside and pass the result in, or access the attributes directly")
        return super().call_method(tx, name, args, kwargs)

    def _walk(self, tx, name, args, kwargs):
        from kiln._dynamo.variables.builder import wrap
        from kiln._dynamo.variables.lists import ListIteratorVariable, TupleVariable

        table, named = _MEMBER_WALKS[name]
        params = ["prefix", "recurse", "remove_duplicate"] if named else ["recurse"]
        values = {"prefix": "", "recurse": True, "remove_duplicate": True}
        if len(args) > len(params) or any(k not in params for k in kwargs):
            unimplemented(f"Module.{name}() with arguments {len(args)} positional, {sorted(kwargs)}")
        for key, arg in list(zip(params, args)) + list(kwargs.items()):
            values[key] = arg.as_python_constant()
        items = []
        for qualified, tensor, path in _walk_members(self.value, table, values["prefix"], values["recurse"],
                                                     values["remove_duplicate"]):
            source = self._sub(*[step for part in path for step in (part[0], (part[1],))])
            var = wrap(tx, tensor, source)
            items.append(TupleVariable([ConstantVariable(qualified), var]) if named else var)
        return ListIteratorVariable(items)

    def has_unpack_var_sequence(self, tx):
        return hasattr(type(self.value), "__iter__")

    def unpack_var_sequence(self, tx):
        it = self.call_method(tx, "__iter__", [], {})
        return it.unpack_var_sequence(tx)
