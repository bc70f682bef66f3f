// dynamo/bytecode_test.cc: the decoder and the bytecode analyses, against code objects compiled
// by the embedded interpreter and against the `dis` module.
#include "dynamo/bytecode.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln::dynamo
