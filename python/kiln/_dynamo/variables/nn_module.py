"""NNModuleVariable: a kiln.nn.Module reached from the frame.

Modules are inlined, never left as call_module nodes: calling one inlines Module.__call__ (so
hooks behave as in eager) and its forward, attribute reads resolve as Module.__getattr__ does
(instance dict, then _parameters, _buffers and _modules), and parameters and buffers become graph
inputs with sources like L['self']._modules['fc']._parameters['weight']. The module itself is
guarded on its type; every attribute the trace read is guarded through its own source.
"""

from kiln._dynamo.exc import unimplemented
from kiln._dynamo.source import AttrSource, GetItemSource
from kiln._dynamo.variables.base import ObjectVariable
from kiln._dynamo.variables.misc import object_getattr


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
        if name in ("parameters", "named_parameters", "buffers", "modules", "children", "named_modules",
                    "named_children", "state_dict"):
            unimplemented(f"Module.{name}() inside a compiled function",
                          "call it outside and pass the result in, or access the attributes directly")
        return super().call_method(tx, name, args, kwargs)

    def has_unpack_var_sequence(self, tx):
        return hasattr(type(self.value), "__iter__")

    def unpack_var_sequence(self, tx):
        it = self.call_method(tx, "__iter__", [], {})
        return it.unpack_var_sequence(tx)
