"""The symbolic bytecode interpreter: runs a frame's bytecode over variable trackers.

InstructionTranslator walks the instructions of the frame's code (decoded in C++,
dynamo/bytecode.h) with a stack and locals of trackers. Tensor work lands in the OutputGraph;
constants fold; user functions and module forwards are inlined by InliningInstructionTranslator,
a child interpreter sharing the same graph. The walk ends at RETURN_VALUE (the whole frame is one
graph) or at the first instruction that cannot be modelled (a graph break, see convert_frame.py:
the graph so far is compiled, the instruction runs in Python, a resume function continues).

One handler per opcode name covers CPython 3.11 and 3.12; where they differ (PRECALL, KW_NAMES,
LOAD_ATTR's method bit, COMPARE_OP's argument, comprehensions inlined in 3.12) the handler says so.
"""

import dis
import operator
import sys
import weakref

from kiln import _C
from kiln._dynamo.exc import Unsupported, unimplemented
from kiln._dynamo.source import LocalSource
from kiln._dynamo.variables.base import ConstantVariable, LazyVariable, NotConstant
from kiln._dynamo.variables.builder import wrap
from kiln._dynamo.variables.builtin import BuiltinVariable
from kiln._dynamo.variables.dicts import ConstDictVariable, SetVariable
from kiln._dynamo.variables.functions import CellVariable, NestedUserFunctionVariable, bind_arguments
from kiln._dynamo.variables.kiln_fns import AutocastVariable, GradModeVariable, WithExitVariable
from kiln._dynamo.variables.lists import ListIteratorVariable, ListVariable, SliceVariable, TupleVariable
from kiln._dynamo.variables.misc import NullVariable, SuperVariable
from kiln._dynamo.variables.tensor import SymNodeVariable, TensorVariable
from kiln.fx.traceback import format_stack

PY312 = sys.version_info >= (3, 12)
_NB_OPS = [getattr(operator, n) for n in (
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift", "sub", "truediv", "xor",
    "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod", "ior", "ipow", "irshift", "isub", "itruediv",
    "ixor")]
_COMPARE = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
_MAX_INLINE_DEPTH = 48


class Instruction:
    __slots__ = ("opname", "opcode", "arg", "offset", "line", "target", "index", "argval")

    def __init__(self, raw, index, code):
        opcode, arg, offset, _start, line, target, _is_target = raw
        self.opcode, self.arg, self.offset, self.line, self.target, self.index = opcode, arg, offset, line, target, index
        self.opname = dis.opname[opcode]
        self.argval = None


_DECODED = weakref.WeakKeyDictionary()  # code -> instructions (dies with the code object)


def instructions_of(code):
    """Decoded instructions of `code`, cached per code object."""
    cached = _DECODED.get(code)
    if cached is None:
        cached = [Instruction(raw, i, code) for i, raw in enumerate(_C._dynamo._decode(code))]
        _DECODED[code] = cached
    return cached


class BreakRequest(Exception):
    """Internal: the root translator must stop before instruction `index` (a graph break)."""

    def __init__(self, index, error):
        self.index, self.error = index, error


class InstructionTranslatorBase:
    def __init__(self, output, code, f_globals, symbolic_locals, *, parent=None, closure=None):
        self.output, self.code, self.f_globals = output, code, f_globals
        self.symbolic_locals = symbolic_locals
        self.parent = parent
        self.closure = closure or {}  # free var name -> CellVariable
        self.cells = {}               # cell var name -> CellVariable
        self.stack = []
        self.instructions = instructions_of(code)
        self.ip = 0
        self.current = None
        self.kw_names = None
        self.return_value = None
        self.depth = 0 if parent is None else parent.depth + 1

    # --- where we are -----------------------------------------------------------------------
    def location(self):
        line = self.current.line if self.current is not None else self.code.co_firstlineno
        from kiln._dynamo.convert_frame import display_name

        return f"{self.code.co_filename}:{line} in {display_name(self.code)}"

    def user_stack(self):
        frames = []
        tx = self
        while tx is not None:
            frames.append(tx.location())
            tx = tx.parent
        return list(reversed(frames))

    def frame_summaries(self):
        """[(filename, line, function name)] from the compiled frame to the innermost inlined one."""
        from kiln._dynamo.convert_frame import display_name

        frames = []
        tx = self
        while tx is not None:
            line = tx.current.line if tx.current is not None else tx.code.co_firstlineno
            frames.append((tx.code.co_filename, line, display_name(tx.code)))
            tx = tx.parent
        return list(reversed(frames))

    def stack_trace(self):
        """The user's call chain here as traceback text: a node's meta["stack_trace"] (kiln.fx.traceback)."""
        return format_stack(self.frame_summaries())

    # --- stack ----------------------------------------------------------------------------
    def push(self, v):
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # --- the loop -------------------------------------------------------------------------
    def run(self):
        instructions = self.instructions
        while self.return_value is None:
            inst = instructions[self.ip]
            self.current = inst
            self.ip += 1
            handler = getattr(self, inst.opname, None)
            if handler is None:
                unimplemented(f"the {inst.opname} instruction", "this Python construct is not traced yet")
            handler(inst)
        return self.return_value

    def jump(self, inst, index=None):
        self.ip = inst.target if index is None else index

    # --- loads and stores -----------------------------------------------------------------
    def NOP(self, inst):
        pass

    RESUME = NOP
    PRECALL = NOP
    COPY_FREE_VARS = NOP
    EXTENDED_ARG = NOP

    def PUSH_NULL(self, inst):
        self.push(NullVariable())

    def POP_TOP(self, inst):
        self.pop()

    def END_FOR(self, inst):
        self.popn(2)

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    def LOAD_CONST(self, inst):
        self.push(ConstantVariable(self.code.co_consts[inst.arg]))

    def RETURN_CONST(self, inst):
        self.do_return(ConstantVariable(self.code.co_consts[inst.arg]))

    def _local_name(self, inst):
        return self.code.co_varnames[inst.arg]

    def LOAD_FAST(self, inst):
        name = self._local_name(inst)
        if name not in self.symbolic_locals:
            unimplemented(f"local variable {name!r} referenced before assignment")
        value = self.symbolic_locals[name]
        if isinstance(value, LazyVariable):
            value = value.realize(self)
            self.symbolic_locals[name] = value
        self.push(value)

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):  # 3.12 inlined comprehensions save the outer binding
        name = self._local_name(inst)
        if name in self.symbolic_locals:
            self.LOAD_FAST(inst)
            del self.symbolic_locals[name]
        else:
            self.push(NullVariable())

    def STORE_FAST(self, inst):
        value = self.pop()
        name = self._local_name(inst)
        if isinstance(value, NullVariable):
            self.symbolic_locals.pop(name, None)
        else:
            self.symbolic_locals[name] = value

    def DELETE_FAST(self, inst):
        self.symbolic_locals.pop(self._local_name(inst), None)

    def _deref_name(self, inst):
        return self.code._varname_from_oparg(inst.arg)

    def _cell(self, name):
        if name in self.cells:
            return self.cells[name]
        if name in self.closure:
            return self.closure[name]
        unimplemented(f"closure variable {name!r}")

    def MAKE_CELL(self, inst):
        name = self._deref_name(inst)
        cell = CellVariable(self.symbolic_locals.pop(name, None))
        self.cells[name] = cell

    def LOAD_DEREF(self, inst):
        cell = self._cell(self._deref_name(inst))
        if cell.contents is None:
            unimplemented(f"free variable {self._deref_name(inst)!r} referenced before assignment")
        self.push(cell.contents)

    LOAD_CLASSDEREF = LOAD_DEREF

    def STORE_DEREF(self, inst):
        name = self._deref_name(inst)
        if name not in self.cells:
            unimplemented(f"assigning to the nonlocal {name!r} of an enclosing function",
                          "return the value instead of assigning a nonlocal")
        self.cells[name].contents = self.pop()

    def DELETE_DEREF(self, inst):
        self._cell(self._deref_name(inst)).contents = None

    def LOAD_CLOSURE(self, inst):
        self.push(self._cell(self._deref_name(inst)))

    def LOAD_GLOBAL(self, inst):
        name = self.code.co_names[inst.arg >> 1]
        if inst.arg & 1:
            self.push(NullVariable())
        self.push(self.load_global(name))

    def load_global(self, name):
        if self.f_globals is self.output.root_globals:
            stored = self.output.side_effects.load_global(name)  # assigned earlier in this translation
            if stored is not None:
                return stored
        if name in self.f_globals:
            return self.output.wrap_global(self, self.f_globals, name)
        builtins = self.f_globals.get("__builtins__", __builtins__)
        table = builtins if isinstance(builtins, dict) else builtins.__dict__
        if name in table:
            return wrap(self, table[name], None)
        unimplemented(f"name {name!r} is not defined")

    def STORE_GLOBAL(self, inst):
        name = self.code.co_names[inst.arg]
        value = self.pop()
        if self.f_globals is not self.output.root_globals:
            unimplemented(f"assigning the global {name!r} of another module ({self.f_globals.get('__name__')})",
                          "assign it outside the compiled function")
        self.output.side_effects.store_global(self, name, value)  # written after the graph

    def DELETE_GLOBAL(self, inst):
        unimplemented(f"deleting the global {self.code.co_names[inst.arg]!r}", "delete it outside the compiled function")

    def LOAD_ATTR(self, inst):
        if PY312:
            name = self.code.co_names[inst.arg >> 1]
            obj = self.pop()
            attr = self.getattr(obj, name)
            if inst.arg & 1:
                self.push(NullVariable())
            self.push(attr)
        else:
            self.push(self.getattr(self.pop(), self.code.co_names[inst.arg]))

    def LOAD_METHOD(self, inst):  # 3.11
        obj = self.pop()
        self.push(NullVariable())
        self.push(self.getattr(obj, self.code.co_names[inst.arg]))

    def getattr(self, obj, name):
        return BuiltinVariable(getattr).call_function(self, [obj, ConstantVariable(name)], {})

    def STORE_ATTR(self, inst):
        obj, value = self.pop(), self.pop()
        self.output.side_effects.store_attr(self, obj, self.code.co_names[inst.arg], value)

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        unimplemented(f"deleting attribute {self.code.co_names[inst.arg]!r} of {obj.describe()}",
                      "delete it outside the compiled function")

    # --- operators --------------------------------------------------------------------------
    def _call_builtin(self, fn, args):
        return BuiltinVariable(fn).call_function(self, args, {})

    def BINARY_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(self._call_builtin(_NB_OPS[inst.arg], [a, b]))

    def BINARY_SUBSCR(self, inst):
        index, obj = self.pop(), self.pop()
        self.push(self._call_builtin(operator.getitem, [obj, index]))

    def BINARY_SLICE(self, inst):
        stop, start = self.pop(), self.pop()
        obj = self.pop()
        self.push(self._call_builtin(operator.getitem, [obj, SliceVariable(start, stop, ConstantVariable(None))]))

    def STORE_SUBSCR(self, inst):
        index, obj, value = self.pop(), self.pop(), self.pop()
        self._call_builtin(operator.setitem, [obj, index, value])

    def STORE_SLICE(self, inst):
        stop, start = self.pop(), self.pop()
        obj, value = self.pop(), self.pop()
        self._call_builtin(operator.setitem, [obj, SliceVariable(start, stop, ConstantVariable(None)), value])

    def DELETE_SUBSCR(self, inst):
        index, obj = self.pop(), self.pop()
        self._call_builtin(operator.delitem, [obj, index])

    def UNARY_NEGATIVE(self, inst):
        self.push(self._call_builtin(operator.neg, [self.pop()]))

    def UNARY_POSITIVE(self, inst):
        self.push(self._call_builtin(operator.pos, [self.pop()]))

    def UNARY_INVERT(self, inst):
        self.push(self._call_builtin(operator.invert, [self.pop()]))

    def UNARY_NOT(self, inst):
        self.push(self._call_builtin(operator.not_, [self.pop()]))

    def COMPARE_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(self._call_builtin(_COMPARE[inst.arg >> 4 if PY312 else inst.arg], [a, b]))

    def IS_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(self._call_builtin(operator.is_not if inst.arg else operator.is_, [a, b]))

    def CONTAINS_OP(self, inst):
        seq, item = self.pop(), self.pop()
        result = self._call_builtin(operator.contains, [seq, item])
        self.push(self._call_builtin(operator.not_, [result]) if inst.arg else result)

    def GET_LEN(self, inst):
        self.push(self._call_builtin(len, [self.stack[-1]]))

    # --- building containers ----------------------------------------------------------------
    def BUILD_TUPLE(self, inst):
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst):
        self.push(SetVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        d = ConstDictVariable({})
        for k, v in zip(items[::2], items[1::2]):
            d.call_method(self, "__setitem__", [k, v], {})
        self.push(d)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python_constant()
        values = self.popn(inst.arg)
        self.push(ConstDictVariable(dict(zip(keys, values))))

    def BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)
        if len(parts) == 2:
            parts.append(ConstantVariable(None))
        self.push(SliceVariable(*parts))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))

    def FORMAT_VALUE(self, inst):
        spec = self.pop().as_python_constant() if inst.arg & 0x04 else ""
        value = self.pop()
        if not value.is_python_constant():
            unimplemented(f"an f-string formatting {value.describe()}", "format only constants inside compiled code")
        v = value.as_python_constant()
        conv = inst.arg & 0x03
        v = str(v) if conv == 1 else repr(v) if conv == 2 else ascii(v) if conv == 3 else v
        self.push(ConstantVariable(format(v, spec)))

    def LIST_APPEND(self, inst):
        v = self.pop()
        self.stack[-inst.arg].call_method(self, "append", [v], {})

    def SET_ADD(self, inst):
        v = self.pop()
        self.stack[-inst.arg].call_method(self, "add", [v], {})

    def MAP_ADD(self, inst):
        v, k = self.pop(), self.pop()
        self.stack[-inst.arg].call_method(self, "__setitem__", [k, v], {})

    def LIST_EXTEND(self, inst):
        v = self.pop()
        self.stack[-inst.arg].call_method(self, "extend", [v], {})

    def SET_UPDATE(self, inst):
        v = self.pop()
        self.stack[-inst.arg].call_method(self, "update", [v], {})

    def DICT_UPDATE(self, inst):
        v = self.pop()
        self.stack[-inst.arg].call_method(self, "update", [v], {})

    DICT_MERGE = DICT_UPDATE

    def LIST_TO_TUPLE(self, inst):
        self.push(TupleVariable(self.pop().unpack_var_sequence(self)))

    def CALL_INTRINSIC_1(self, inst):
        if inst.arg == 6:  # INTRINSIC_LIST_TO_TUPLE
            self.LIST_TO_TUPLE(inst)
        elif inst.arg == 5:  # INTRINSIC_UNARY_POSITIVE
            self.UNARY_POSITIVE(inst)
        else:
            unimplemented(f"CALL_INTRINSIC_1 {inst.arg}")

    def UNPACK_SEQUENCE(self, inst):
        seq = self.pop()
        items = seq.unpack_var_sequence(self) if seq.has_unpack_var_sequence(self) else None
        if items is None:
            unimplemented(f"unpacking {seq.describe()}")
        if len(items) != inst.arg:
            unimplemented(f"unpacking {len(items)} values into {inst.arg} names")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):
        seq = self.pop()
        items = seq.unpack_var_sequence(self)
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            unimplemented("not enough values to unpack")
        head, middle = items[:before], items[before:len(items) - after]
        tail = items[len(items) - after:]
        for item in reversed(tail):
            self.push(item)
        self.push(ListVariable(middle))
        for item in reversed(head):
            self.push(item)

    # --- iteration and jumps ----------------------------------------------------------------
    def GET_ITER(self, inst):
        self.push(self._call_builtin(iter, [self.pop()]))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, ListIteratorVariable):
            unimplemented(f"a for loop over {it.describe()}", "loop over lists, tuples, ranges, dicts or modules")
        item = it.next_item()
        if item is None:
            self.pop()
            self.jump(inst, inst.target + 1 if PY312 else inst.target)  # 3.12 skips END_FOR
        else:
            self.push(item)

    def JUMP_FORWARD(self, inst):
        self.jump(inst)

    JUMP_BACKWARD = JUMP_FORWARD
    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD
    JUMP = JUMP_FORWARD

    def _branch(self, inst, value, jump_if):
        if isinstance(value, NullVariable):
            unimplemented("branch on NULL")
        truth = value.truth(self)
        if truth == jump_if:
            self.jump(inst)

    def POP_JUMP_IF_FALSE(self, inst):
        self._branch(inst, self.pop(), False)

    def POP_JUMP_IF_TRUE(self, inst):
        self._branch(inst, self.pop(), True)

    def _is_none(self, value):
        if isinstance(value, (TensorVariable, SymNodeVariable)):
            return False
        if value.is_python_constant():
            return value.as_python_constant() is None
        return False

    def POP_JUMP_IF_NONE(self, inst):
        if self._is_none(self.pop()):
            self.jump(inst)

    def POP_JUMP_IF_NOT_NONE(self, inst):
        if not self._is_none(self.pop()):
            self.jump(inst)

    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    # --- calls --------------------------------------------------------------------------------
    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst):
        n = inst.arg
        kw_names, self.kw_names = self.kw_names or (), None
        args = self.popn(n)
        fn = self.pop()
        below = self.pop()
        if not isinstance(below, NullVariable):  # (method, self) layout
            args = [fn] + args
            fn = below
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
            args = args[:len(args) - len(kw_names)]
        self.push(self.call_function(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs = self.pop() if inst.arg & 1 else ConstDictVariable({})
        args = self.pop()
        fn = self.pop()
        below = self.pop()
        if not isinstance(below, NullVariable):
            unimplemented("CALL_FUNCTION_EX with a method layout")
        if not isinstance(kwargs, ConstDictVariable):
            unimplemented(f"**kwargs from {kwargs.describe()}")
        self.push(self.call_function(fn, args.unpack_var_sequence(self), dict(kwargs.items)))

    def call_function(self, fn, args, kwargs):
        if isinstance(fn, NullVariable):
            unimplemented("calling NULL")
        return fn.call_function(self, args, kwargs)

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_python_constant()  # 3.11 and 3.12: no qualname below it
        closure = self.pop() if inst.arg & 0x08 else None
        if inst.arg & 0x04:
            self.pop()  # annotations
        kwdefaults = self.pop() if inst.arg & 0x02 else None
        defaults = self.pop() if inst.arg & 0x01 else None
        cells = {}
        if closure is not None:
            for name, cell in zip(code.co_freevars, closure.items):
                cells[name] = cell
        self.push(NestedUserFunctionVariable(
            code, self.f_globals, code.co_name,
            defaults.unpack_var_sequence(self) if defaults is not None else [],
            dict(kwdefaults.items) if kwdefaults is not None else {}, cells))

    # --- with-blocks (grad modes) -------------------------------------------------------------
    def BEFORE_WITH(self, inst):
        ctx = self.pop()
        if not isinstance(ctx, (GradModeVariable, AutocastVariable)):
            unimplemented(f"`with` over {ctx.describe()}",
                          "only kiln.no_grad/enable_grad/set_grad_enabled and kiln.autocast are traced")
        self.push(WithExitVariable(ctx))
        self.push(ctx.call_method(self, "__enter__", [], {}))

    # --- returns, raises, imports ---------------------------------------------------------------
    def RETURN_VALUE(self, inst):
        self.do_return(self.pop())

    def do_return(self, value):
        self.return_value = value

    def RAISE_VARARGS(self, inst):
        unimplemented("raise inside the compiled function", "raise outside, or make the condition a constant")

    def LOAD_ASSERTION_ERROR(self, inst):
        unimplemented("a failing assert", "the asserted condition was false while tracing")

    def LOAD_SUPER_ATTR(self, inst):  # 3.12: super().name
        obj, cls = self.pop(), self.pop()
        self.pop()  # the global `super`
        attr = SuperVariable(cls, obj).var_getattr(self, self.code.co_names[inst.arg >> 2])
        if inst.arg & 1:
            self.push(NullVariable())
        self.push(attr)

    def IMPORT_NAME(self, inst):
        unimplemented("import inside the compiled function", "import at module level")

    def inline_user_function_return(self, fn, args, kwargs):
        return InliningInstructionTranslator.inline_call(self, fn, args, kwargs)


class InstructionTranslator(InstructionTranslatorBase):
    """The root: translates a frame's code from its first instruction."""

    def __init__(self, output, code, f_locals, f_globals, break_at=None):
        symbolic = {name: LazyVariable(value, LocalSource(name)) for name, value in f_locals.items()
                    if name in code.co_varnames}
        closure = {}
        for name in code.co_freevars:
            if name in f_locals:
                closure[name] = CellVariable(LazyVariable(f_locals[name], LocalSource(name)))
        super().__init__(output, code, f_globals, symbolic, closure=closure)
        self.break_at = break_at  # instruction index to stop before, or None

    def _cell(self, name):
        cell = super()._cell(name)
        if isinstance(cell.contents, LazyVariable):
            cell.contents = cell.contents.realize(self)
        return cell

    def run(self):
        instructions = self.instructions
        while self.return_value is None:
            if self.ip == self.break_at:
                raise BreakRequest(self.ip, None)
            inst = instructions[self.ip]
            self.current = inst
            self.ip += 1
            handler = getattr(self, inst.opname, None)
            try:
                if handler is None:
                    unimplemented(f"the {inst.opname} instruction", "this Python construct is not traced yet")
                handler(inst)
            except NotConstant as e:
                error = not_constant_break(e).locate(self.location(), self.user_stack(), self.frame_summaries())
                raise BreakRequest(inst.index, error) from e
            except Unsupported as e:
                e.locate(self.location(), self.user_stack(), self.frame_summaries())
                raise BreakRequest(inst.index, e)
        return self.return_value


def not_constant_break(error):
    """A NotConstant that escaped a handler (it needed a compile-time constant, e.g. an argument
    of a function it cannot call symbolically): the interpreter cannot model it, a graph break."""
    what = error.args[0].describe() if error.args and hasattr(error.args[0], "describe") else "a value"
    return Unsupported(f"{what} used where a compile-time constant is needed",
                       "move this call out of the compiled function")


class InliningInstructionTranslator(InstructionTranslatorBase):
    """Runs a called user function's bytecode inside the caller's graph.

    A generator function runs to completion when called: its yielded values become the items of
    the iterator the call returns (the values are graph values, so running them early changes no
    observable order)."""

    yields = None

    @staticmethod
    def inline_call(parent, fn, args, kwargs):
        code = fn.get_code()
        if code.co_flags & (0x80 | 0x100 | 0x200):  # coroutine, iterable coroutine, async generator
            unimplemented(f"calling the coroutine {code.co_name}", "async code is not traced")
        if parent.depth >= _MAX_INLINE_DEPTH:
            unimplemented("inlining depth limit reached (recursion?)")
        bound = bind_arguments(parent, fn, args, kwargs)
        tx = InliningInstructionTranslator(parent.output, code, fn.get_globals(), bound, parent=parent,
                                           closure=fn.closure_cells(parent))
        tx.yields = [] if code.co_flags & 0x20 else None
        previous, parent.output.current_tx = parent.output.current_tx, tx
        try:
            result = tx.run()
        except Unsupported as e:
            e.locate(tx.location(), tx.user_stack(), tx.frame_summaries())
            raise
        except NotConstant as e:
            raise not_constant_break(e).locate(tx.location(), tx.user_stack(), tx.frame_summaries()) from e
        finally:
            parent.output.current_tx = previous
        if tx.yields is not None:  # a generator runs to completion here; its values iterate later
            return ListIteratorVariable(tx.yields)
        return result

    # --- generators (Note: run eagerly at creation, see inline_call) ---------------------------
    def RETURN_GENERATOR(self, inst):
        if self.yields is None:
            unimplemented("RETURN_GENERATOR outside a generator")
        self.push(ConstantVariable(None))  # what the first send() delivers, popped next

    def YIELD_VALUE(self, inst):
        if self.yields is None:
            unimplemented("yield outside a generator")
        self.yields.append(self.pop())
        self.push(ConstantVariable(None))

    def SEND(self, inst):
        unimplemented("`yield from` / await in a traced generator")

    def load_global(self, name):
        if self.f_globals is self.output.root_globals:
            return super().load_global(name)
        if name in self.f_globals:
            return self.output.wrap_foreign_global(self, self.f_globals, name)
        return super().load_global(name)
