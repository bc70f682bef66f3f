// dynamo/bytecode_test.cc: the decoder and the bytecode analyses, against code objects compiled
// by the embedded interpreter and against the `dis` module.
#include "dynamo/bytecode.h"

#include <gtest/gtest.h>

#include "dynamo/bytecode_analysis.h"

#include "dynamo/testing/embedded_python.h"

namespace kiln::dynamo {
namespace {

PyCodeObject* CodeOf(const std::string& source, const char* name) {
  PyObject* fn = testing::Evaluate(source, name);
  PyObject* code = PyObject_GetAttrString(fn, "__code__");
  Py_DECREF(fn);
  return reinterpret_cast<PyCodeObject*>(code);
}

TEST(Decode, MatchesDisOffsetsAndJumpTargets) {
  PyCodeObject* code = CodeOf(
      "def f(x, n):\n"
      "    for i in range(n):\n"
      "        if x > i:\n"
      "            x = x - 1\n"
      "    return x\n",
      "f");
  std::vector<Instruction> ins;
  ASSERT_TRUE(Decode(code, &ins));
  PyObject* dis_offsets = testing::Evaluate(
      "import dis\n"
      "def f(x, n):\n"
      "    for i in range(n):\n"
      "        if x > i:\n"
      "            x = x - 1\n"
      "    return x\n"
      "offsets = [i.offset for i in dis.get_instructions(f)]\n",
      "offsets");
  ASSERT_EQ(PyList_GET_SIZE(dis_offsets), static_cast<Py_ssize_t>(ins.size()));
  for (size_t i = 0; i < ins.size(); ++i)
    EXPECT_EQ(PyLong_AsLong(PyList_GET_ITEM(dis_offsets, i)), ins[i].offset) << "instruction " << i;
  int jumps = 0;
  for (const Instruction& i : ins)
    if (i.jump_target >= 0) {
      ++jumps;
      EXPECT_TRUE(ins[i.jump_target].is_jump_target);
    }
  EXPECT_GE(jumps, 3);  // the loop's FOR_ITER exit, the if, the back edge
  Py_DECREF(dis_offsets);
  Py_DECREF(code);
}

TEST(ExceptionTable, MatchesDisAndRoundTrips) {
  PyObject* ns = testing::RunSource(
      "import dis\n"
      "def f(x):\n"
      "    try:\n"
      "        for i in range(x):\n"
      "            with open(i) as g:\n"
      "                x += g.read()\n"
      "    except (ValueError, OSError) as e:\n"
      "        return e\n"
      "    finally:\n"
      "        x = None\n"
      "    return x\n"
      "entries = [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis._parse_exception_table(f.__code__)]\n");
  PyObject* fn = PyDict_GetItemString(ns, "f");
  PyCodeObject* code = reinterpret_cast<PyCodeObject*>(PyObject_GetAttrString(fn, "__code__"));
  PyObject* expected = PyDict_GetItemString(ns, "entries");
  std::vector<ExceptionTableEntry> table;
  ASSERT_TRUE(CodeExceptionTable(code, &table));
  ASSERT_EQ(static_cast<Py_ssize_t>(table.size()), PyList_GET_SIZE(expected));
  ASSERT_GE(table.size(), 4u);
  for (size_t i = 0; i < table.size(); ++i) {
    int start, end, target, depth, lasti;
    ASSERT_TRUE(PyArg_ParseTuple(PyList_GET_ITEM(expected, i), "iiiip", &start, &end, &target, &depth, &lasti));
    EXPECT_EQ(table[i], (ExceptionTableEntry{start, end, target, depth, lasti != 0})) << "entry " << i;
  }
  std::string bytes(PyBytes_AS_STRING(code->co_exceptiontable), PyBytes_GET_SIZE(code->co_exceptiontable));
  EXPECT_EQ(EncodeExceptionTable(table), bytes);
  // Multi-group varints: offsets past 64 and 4096 code units.
  std::vector<ExceptionTableEntry> big = {{10, 200, 9000, 3, true}, {200000, 200010, 300000, 70, false}};
  std::vector<ExceptionTableEntry> back;
  ASSERT_TRUE(ParseExceptionTable(EncodeExceptionTable(big), &back));
  EXPECT_EQ(back, big);
  EXPECT_FALSE(ParseExceptionTable(EncodeExceptionTable(big).substr(0, 5), &back));
  Py_DECREF(code);
  Py_DECREF(ns);
}

TEST(ExceptionTable, RoundTripsAcrossTheStdlib) {
  PyObject* codes = testing::Evaluate(
      "import argparse, dis, json.decoder, traceback, types\n"
      "codes = []\n"
      "spaces = [vars(m) for m in (argparse, dis, json.decoder, traceback)]\n"
      "spaces += [vars(c) for s in spaces for c in s.values() if isinstance(c, type)]\n"
      "todo = [f.__code__ for s in spaces for f in s.values() if isinstance(f, types.FunctionType)]\n"
      "while todo:\n"
      "    c = todo.pop()\n"
      "    codes.append((c, [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis._parse_exception_table(c)]))\n"
      "    todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]\n",
      "codes");
  int with_handlers = 0;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(codes); ++i) {
    PyCodeObject* code = reinterpret_cast<PyCodeObject*>(PyTuple_GET_ITEM(PyList_GET_ITEM(codes, i), 0));
    PyObject* expected = PyTuple_GET_ITEM(PyList_GET_ITEM(codes, i), 1);
    std::vector<ExceptionTableEntry> table;
    ASSERT_TRUE(CodeExceptionTable(code, &table));
    ASSERT_EQ(static_cast<Py_ssize_t>(table.size()), PyList_GET_SIZE(expected));
    for (size_t k = 0; k < table.size(); ++k) {
      int start, end, target, depth, lasti;
      ASSERT_TRUE(PyArg_ParseTuple(PyList_GET_ITEM(expected, k), "iiiip", &start, &end, &target, &depth, &lasti));
      EXPECT_EQ(table[k], (ExceptionTableEntry{start, end, target, depth, lasti != 0}));
    }
    std::string bytes(PyBytes_AS_STRING(code->co_exceptiontable), PyBytes_GET_SIZE(code->co_exceptiontable));
    EXPECT_EQ(EncodeExceptionTable(table), bytes);
    with_handlers += !table.empty();
  }
  EXPECT_GT(with_handlers, 20);
  Py_DECREF(codes);
}

// Live locals at the instruction `dis` lists as number `index` of function `name` in `source`.
std::vector<std::string> LiveAt(const std::string& source, const char* name, const std::string& where) {
  PyObject* ns = testing::RunSource(
      "import dis\n" + source + "ins = list(dis.get_instructions(" + name + "))\n" + "offset = " + where + "\n");
  PyObject* fn = PyDict_GetItemString(ns, name);
  PyCodeObject* code = reinterpret_cast<PyCodeObject*>(PyObject_GetAttrString(fn, "__code__"));
  std::vector<std::string> names;
  EXPECT_TRUE(LiveLocalNamesAt(code, static_cast<int>(PyLong_AsLong(PyDict_GetItemString(ns, "offset"))), &names));
  Py_DECREF(code);
  Py_DECREF(ns);
  return names;
}

using Names = std::vector<std::string>;

// Whether InTryBlock puts the instruction of f's code at `where` (a Python expression over `ins`,
// f's dis instructions, giving an offset) in a try block.
bool InTryAt(const std::string& source, const std::string& where) {
  PyObject* ns = testing::RunSource("import dis\n" + source + "ins = list(dis.get_instructions(f))\noffset = " + where + "\n");
  PyCodeObject* code = reinterpret_cast<PyCodeObject*>(PyObject_GetAttrString(PyDict_GetItemString(ns, "f"), "__code__"));
  bool in_try = false;
  EXPECT_TRUE(InTryBlock(code, static_cast<int>(PyLong_AsLong(PyDict_GetItemString(ns, "offset"))), &in_try));
  Py_DECREF(code);
  Py_DECREF(ns);
  return in_try;
}

TEST(ExceptionTable, TryBlocksButNotWithBlocks) {
  const std::string try_src = "def f(x):\n    try:\n        y = g(x)\n    except ValueError:\n        y = 0\n    return h(y)\n";
  EXPECT_TRUE(InTryAt(try_src, "[i for i in ins if i.opname == 'CALL'][0].offset"));   // g(x)
  EXPECT_FALSE(InTryAt(try_src, "[i for i in ins if i.opname == 'CALL'][-1].offset"));  // h(y)
  EXPECT_FALSE(InTryAt(try_src, "0"));
  // a with block's body is covered by the table too, with the cleanup as its handler
  const std::string with_src = "def f(x):\n    with m:\n        y = g(x)\n    return h(y)\n";
  EXPECT_FALSE(InTryAt(with_src, "[i for i in ins if i.opname == 'CALL'][0].offset"));  // g(x)
  const std::string both = "def f(x):\n    with m:\n        try:\n            y = g(x)\n        finally:\n            y = 1\n    return y\n";
  EXPECT_TRUE(InTryAt(both, "[i for i in ins if i.opname == 'CALL'][0].offset"));  // g(x), in try-finally
}

TEST(Liveness, Branches) {
  const std::string src = "def f(a, b, c, d):\n    if a:\n        return b\n    d = 1\n    return c + d\n";
  EXPECT_EQ(LiveAt(src, "f", "0"), (Names{"a", "b", "c"}));  // d is written before its read
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.argval == 'b'][0].offset"), (Names{"b"}));
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'STORE_FAST'][0].offset"), (Names{"c"}));
}

TEST(Liveness, Loops) {
  const std::string src =
      "def f(n, m):\n    s = 0\n    for i in range(n):\n        s += i\n"
      "    while s > m:\n        s -= 1\n    return s\n";
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'FOR_ITER'][0].offset"), (Names{"m", "s"}));
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'STORE_FAST'][1].offset"), (Names{"m", "s"}));
  // Inside the while loop: the back edge keeps m live.
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'STORE_FAST' and i.argval == 's'][-1].offset"),
            (Names{"m"}));
}

TEST(Liveness, TryExceptHandlerEdges) {
  const std::string src =
      "def f(a, b, c):\n    try:\n        a = g(c)\n    except ValueError:\n        return a + b\n    return a\n";
  // The store to `a` can be skipped by the exception, so the old `a` is live before it.
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'STORE_FAST'][0].offset"), (Names{"a", "b"}));
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'STORE_FAST'][0].offset + 2"), (Names{"a"}));
}

TEST(Liveness, DeleteReadsThenKills) {
  const std::string src = "def f(x, y):\n    del x\n    x = y\n    return x\n";
  EXPECT_EQ(LiveAt(src, "f", "0"), (Names{"x", "y"}));  // del raises if x is unbound
  EXPECT_EQ(LiveAt(src, "f", "[i for i in ins if i.opname == 'DELETE_FAST'][0].offset + 2"), (Names{"y"}));
}

}  // namespace
}  // namespace kiln::dynamo
