// dynamo/guards_test.cc: the guard tree (Note [Guard tree] in guards.h): every leaf kind passing
// and failing, accessors on missing keys/attributes/indices, the printer, and ShapeEnv guards
// over symbols bound by tensor matches. Tensors are C++ kiln Tensors in PyCapsules, read by a test
// unwrapper (Note [Tensor unwrapper]); kiln._C is never imported.
#include "dynamo/guards.h"

#include <gtest/gtest.h>

#include "autograd/grad_mode.h"
#include "dynamo/testing/embedded_python.h"
#include "tensor/empty.h"

namespace kiln::dynamo {
namespace {

constexpr const char* kCapsule = "kiln.test.Tensor";

const Tensor* CapsuleTensor(PyObject* o) {
  if (!PyCapsule_IsValid(o, kCapsule)) return nullptr;
  return static_cast<const Tensor*>(PyCapsule_GetPointer(o, kCapsule));
}

PyObject* Wrap(Tensor t) {
  return PyCapsule_New(new Tensor(std::move(t)), kCapsule,
                       [](PyObject* c) { delete static_cast<Tensor*>(PyCapsule_GetPointer(c, kCapsule)); });
}

Tensor Cpu(DimVector sizes, ScalarType dtype = ScalarType::Float32) {
  return EmptyTensor(sizes, dtype, Device(DeviceType::CPU));
}

// A strided CPU float tensor.
Tensor Strided(DimVector sizes, DimVector strides) {
  SymDimVector s(sizes.begin(), sizes.end()), st(strides.begin(), strides.end());
  return EmptyTensor(s, ScalarType::Float32, Device(DeviceType::CPU), st);
}

constexpr GuardManager::ContiguousStride kContiguous{};

// An owned reference, released at scope end.
struct Ref {
  PyObject* p;
  explicit Ref(PyObject* o) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  operator PyObject*() const { return p; }  // NOLINT
};

class GuardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::EnsurePython();
    SetTensorUnwrapper(&CapsuleTensor);
    ns_ = testing::RunSource(
        "class Box:\n"
        "    def __init__(self, w):\n"
        "        self.w = w\n"
        "def is_positive(v):\n"
        "    return v > 0\n"
        "def boom(v):\n"
        "    raise ValueError('no')\n"
        "W = 7\n");
    globals_ = PyDict_New();
    PyDict_SetItemString(globals_, "W", PyLong_FromLong(7));
  }
  void TearDown() override {
    EXPECT_FALSE(PyErr_Occurred()) << "a check left a Python error set";
    PyErr_Clear();
    Py_DECREF(ns_);
    Py_DECREF(globals_);
  }
  PyObject* Eval(const char* expr) {  // a new reference, evaluated in ns_
    PyObject* v = PyRun_String(expr, Py_eval_input, ns_, ns_);
    if (!v) PyErr_Print();
    return v;
  }
  // f_locals from a Python dict display: Locals("{'n': 3}").
  PyObject* Locals(const char* display) { return Eval(display); }
  // f_locals {"x": tensor}.
  PyObject* TensorLocals(Tensor t) {
    PyObject* d = PyDict_New();
    PyObject* c = Wrap(std::move(t));
    PyDict_SetItemString(d, "x", c);
    Py_DECREF(c);
    return d;
  }
  std::string Why(const RootGuardManager& root, PyObject* f_locals) {
    auto [ok, why] = root.CheckVerbose(f_locals);
    EXPECT_FALSE(ok);
    return why;
  }

  PyObject* ns_ = nullptr;
  PyObject* globals_ = nullptr;
};

TEST_F(GuardsTest, TypeIdAndEqualsMatch) {
  RootGuardManager root(globals_);
  GuardManager* n = root.DictGetItemManager(Ref(PyUnicode_FromString("n")), "L['n']");
  n->AddTypeMatchGuard(reinterpret_cast<PyObject*>(&PyLong_Type), "n is an int");
  n->AddEqualsMatchGuard(Ref(PyLong_FromLong(3)), "n == 3");
  Ref none(Py_None);
  Py_INCREF(Py_None);
  root.DictGetItemManager(Ref(PyUnicode_FromString("z")), "L['z']")->AddIdMatchGuard(none, "z is None");

  EXPECT_TRUE(root.Check(Ref(Locals("{'n': 3, 'z': None}"))));
  EXPECT_FALSE(root.Check(Ref(Locals("{'n': 4, 'z': None}"))));
  EXPECT_FALSE(root.Check(Ref(Locals("{'n': 3, 'z': 0}"))));
  EXPECT_EQ(Why(root, Ref(Locals("{'n': 3.0, 'z': None}"))), "TYPE_MATCH: type(L['n']) is int -- type is float  # n is an int");
  EXPECT_EQ(Why(root, Ref(Locals("{'n': 4, 'z': None}"))), "EQUALS_MATCH: L['n'] == 3 -- value is 4 (int)  # n == 3");
  EXPECT_EQ(Why(root, Ref(Locals("{'n': 3, 'z': 0}"))), "ID_MATCH: L['z'] is None -- value is 0  # z is None");
}

TEST_F(GuardsTest, EqualsMatchNeedsTheSameType) {
  RootGuardManager root(globals_);
  root.DictGetItemManager(Ref(PyUnicode_FromString("n")), "L['n']")->AddEqualsMatchGuard(Ref(PyLong_FromLong(1)), "");
  EXPECT_TRUE(root.Check(Ref(Locals("{'n': 1}"))));
  EXPECT_FALSE(root.Check(Ref(Locals("{'n': True}"))));  // True == 1, but a bool is not an int
  EXPECT_FALSE(root.Check(Ref(Locals("{'n': 1.0}"))));
}

TEST_F(GuardsTest, LengthAndDictKeys) {
  RootGuardManager root(globals_);
  root.DictGetItemManager(Ref(PyUnicode_FromString("xs")), "L['xs']")->AddLengthCheckGuard(2, "len(xs)");
  root.DictGetItemManager(Ref(PyUnicode_FromString("d")), "L['d']")->AddDictKeysGuard(Ref(Eval("['a', 'b']")), "d's keys");
  EXPECT_TRUE(root.Check(Ref(Locals("{'xs': [1, 2], 'd': {'a': 1, 'b': 2}}"))));
  EXPECT_TRUE(root.Check(Ref(Locals("{'xs': (1, 2), 'd': {'a': 0, 'b': 0}}"))));
  EXPECT_EQ(Why(root, Ref(Locals("{'xs': [1], 'd': {'a': 1, 'b': 2}}"))), "LENGTH_CHECK: len(L['xs']) == 2 -- length is 1  # len(xs)");
  EXPECT_EQ(Why(root, Ref(Locals("{'xs': 5, 'd': {}}"))), "LENGTH_CHECK: len(L['xs']) == 2 -- int has no len()  # len(xs)");
  EXPECT_EQ(Why(root, Ref(Locals("{'xs': [1, 2], 'd': {'b': 1, 'a': 2}}"))),
            "DICT_KEYS: list(L['d'].keys()) == ['a', 'b'] -- key 0 is 'b'  # d's keys");
  EXPECT_FALSE(root.Check(Ref(Locals("{'xs': [1, 2], 'd': {'a': 1}}"))));
  EXPECT_FALSE(root.Check(Ref(Locals("{'xs': [1, 2], 'd': [('a', 1), ('b', 2)]}"))));
}

TEST_F(GuardsTest, LambdaGuardsAndTheirExceptions) {
  RootGuardManager root(globals_);
  GuardManager* n = root.DictGetItemManager(Ref(PyUnicode_FromString("n")), "L['n']");
  n->AddLambdaGuard(Ref(Eval("is_positive")), "n > 0");
  EXPECT_TRUE(root.Check(Ref(Locals("{'n': 1}"))));
  EXPECT_EQ(Why(root, Ref(Locals("{'n': -1}"))), "LAMBDA_GUARD: is_positive(L['n']) -- returned a false value  # n > 0");
  // An exception inside a guard means the guard does not hold; it is cleared.
  EXPECT_FALSE(root.Check(Ref(Locals("{'n': 'a'}"))));
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_NE(Why(root, Ref(Locals("{'n': 'a'}"))).find("raised TypeError: '>' not supported"), std::string::npos);
  RootGuardManager raising(globals_);
  raising.AddLambdaGuard(Ref(Eval("boom")), "");
  EXPECT_EQ(Why(raising, Ref(Locals("{}"))), "LAMBDA_GUARD: boom(L) -- raised ValueError: no");
}

TEST_F(GuardsTest, AccessorsFailOnMissingKeyAttributeOrIndex) {
  RootGuardManager root(globals_);
  GuardManager* box = root.DictGetItemManager(Ref(PyUnicode_FromString("b")), "L['b']");
  GuardManager* w = box->GetAttrManager(Ref(PyUnicode_FromString("w")), "L['b'].w");
  w->GetItemManager(1, "L['b'].w[1]")->AddEqualsMatchGuard(Ref(PyLong_FromLong(5)), "");
  EXPECT_TRUE(root.Check(Ref(Eval("{'b': Box((4, 5))}"))));
  EXPECT_TRUE(root.Check(Ref(Eval("{'b': Box([0, 5, 6])}"))));
  EXPECT_EQ(Why(root, Ref(Eval("{'c': 1}"))),
            "GuardManager: source=L['b'], accessed_by=DictGetItemGuardAccessor('b') -- key 'b' missing");
  EXPECT_EQ(Why(root, Ref(Eval("{'b': 1}"))),
            "GuardManager: source=L['b'].w, accessed_by=GetAttrGuardAccessor(w) -- int object has no attribute 'w'");
  EXPECT_EQ(Why(root, Ref(Eval("{'b': Box((4,))}"))),
            "GuardManager: source=L['b'].w[1], accessed_by=GetItemGuardAccessor(1) -- index 1 out of range for tuple");
  EXPECT_FALSE(root.Check(Ref(Eval("{'b': Box(3)}"))));
  EXPECT_FALSE(root.Check(Ref(Eval("[1]"))));  // f_locals not even a dict
}

TEST_F(GuardsTest, ChildrenAreMemoisedPerAccessorAndKey) {
  RootGuardManager root(globals_);
  GuardManager* a = root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']");
  EXPECT_EQ(root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']"), a);
  EXPECT_NE(root.DictGetItemManager(Ref(PyLong_FromLong(1)), "L[1]"), a);
  EXPECT_EQ(a->GetItemManager(0, "L['x'][0]"), a->GetItemManager(0, "L['x'][0]"));
  EXPECT_NE(a->GetItemManager(0, "L['x'][0]"), a->GetItemManager(1, "L['x'][1]"));
  EXPECT_EQ(a->GetAttrManager(Ref(PyUnicode_FromString("w")), "L['x'].w"), a->GetAttrManager(Ref(PyUnicode_FromString("w")), "L['x'].w"));
  EXPECT_EQ(root.GlobalsDictManager(), root.GlobalsDictManager());
  EXPECT_EQ(root.children().size(), 3u);  // x, 1, G
}

TEST_F(GuardsTest, GlobalsDictManagerReadsTheCapturedGlobals) {
  RootGuardManager root(globals_);
  GuardManager* w = root.GlobalsDictManager()->DictGetItemManager(Ref(PyUnicode_FromString("W")), "G['W']");
  w->AddEqualsMatchGuard(Ref(PyLong_FromLong(7)), "W == 7");
  EXPECT_TRUE(root.Check(Ref(Locals("{}"))));
  PyDict_SetItemString(globals_, "W", Ref(PyLong_FromLong(8)));
  EXPECT_EQ(Why(root, Ref(Locals("{}"))), "EQUALS_MATCH: G['W'] == 7 -- value is 8 (int)  # W == 7");
  PyDict_DelItemString(globals_, "W");
  EXPECT_FALSE(root.Check(Ref(Locals("{}"))));
}

TEST_F(GuardsTest, GlobalStateGuardsGradModeAndDefaultDtype) {
  RootGuardManager root(globals_);
  root.AddGlobalStateGuard("global state");
  Ref empty(Locals("{}"));
  EXPECT_TRUE(root.Check(empty));
  {
    autograd::AutoGradMode off(false);
    EXPECT_EQ(Why(root, empty),
              "GLOBAL_STATE: grad_mode=True, default_dtype=kiln.float32 -- now grad_mode=False, "
              "default_dtype=kiln.float32  # global state");
  }
  SetDefaultDtype(ScalarType::Float64);
  EXPECT_FALSE(root.Check(empty));
  SetDefaultDtype(ScalarType::Float32);
  EXPECT_TRUE(root.Check(empty));
}

TEST_F(GuardsTest, TensorMatchChecksMetadata) {
  RootGuardManager root(globals_);
  Ref example(Wrap(Cpu({4, 3})));
  root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']")
      ->AddTensorMatchGuard(example, {int64_t{4}, int64_t{3}}, {int64_t{3}, int64_t{1}}, "x");
  EXPECT_TRUE(root.Check(Ref(TensorLocals(Cpu({4, 3})))));
  auto why = [&](Tensor t) { return Why(root, Ref(TensorLocals(std::move(t)))); };
  const std::string text =
      "TENSOR_MATCH: check_tensor(L['x'], PyCapsule, DispatchKeySet(CPU), kiln.float32, device=cpu, "
      "requires_grad=False, size=[4, 3], stride=[3, 1]) -- ";
  EXPECT_EQ(why(Cpu({4, 3}, ScalarType::Float64)), text + "dtype is float64  # x");
  EXPECT_EQ(why(EmptyTensor(DimVector{4, 3}, ScalarType::Float32, Device(DeviceType::Meta))),
            text + "device is meta  # x");
  EXPECT_EQ(why(Cpu({4, 3, 1})), text + "dim is 3  # x");
  EXPECT_EQ(why(Cpu({5, 3})), text + "size mismatch at index 0: expected 4, actual 5  # x");
  EXPECT_EQ(why(Strided({4, 3}, {1, 4})), text + "stride mismatch at index 1: expected 1, actual 4  # x");
  // Not a tensor at all: the type differs.
  Ref locals(Locals("{'x': 1}"));
  EXPECT_EQ(Why(root, locals), text + "type is int  # x");
}

TEST_F(GuardsTest, TensorMatchSymbolicSizesAndContiguousStrides) {
  RootGuardManager root(globals_);
  Ref example(Wrap(Cpu({4, 3})));
  // x: [s0, 3] with the contiguous strides of its actual sizes; y: [s0] (the same symbol).
  root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']")
      ->AddTensorMatchGuard(example, {std::string("s0"), int64_t{3}}, {kContiguous, kContiguous}, "x");
  Ref y_example(Wrap(Cpu({4})));
  root.DictGetItemManager(Ref(PyUnicode_FromString("y")), "L['y']")
      ->AddTensorMatchGuard(y_example, {std::string("s0")}, {int64_t{1}}, "y");
  EXPECT_EQ(root.symbols(), std::vector<std::string>{"s0"});
  auto locals = [&](Tensor x, Tensor y) {
    PyObject* d = TensorLocals(std::move(x));
    PyDict_SetItemString(d, "y", Ref(Wrap(std::move(y))));
    return d;
  };
  EXPECT_TRUE(root.Check(Ref(locals(Cpu({4, 3}), Cpu({4})))));
  EXPECT_TRUE(root.Check(Ref(locals(Cpu({9, 3}), Cpu({9})))));
  EXPECT_FALSE(root.Check(Ref(locals(Cpu({9, 3}), Cpu({8})))));  // s0 bound twice, differently
  EXPECT_NE(Why(root, Ref(locals(Cpu({9, 3}), Cpu({8})))).find("size 0 is 8, but s0 = 9 from an earlier guard"),
            std::string::npos);
  EXPECT_FALSE(root.Check(Ref(locals(Strided({4, 3}, {1, 4}), Cpu({4})))));  // not contiguous
  EXPECT_NE(Why(root, Ref(locals(Strided({4, 3}, {3, 2}), Cpu({4})))).find("stride mismatch at index 1: expected 1, actual 2"),
            std::string::npos);
}

TEST_F(GuardsTest, TensorMatchSymbolicAndDerivedStrides) {
  RootGuardManager root(globals_);
  // x: idx[:, -16:] of a growing idx, [2, s0] with strides [s1, 1]; y: a transposed [s0, s2]
  // whose outer stride is its dim 0's stride times its size.
  Ref x_example(Wrap(Strided({2, 16}, {17, 1})));
  root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']")
      ->AddTensorMatchGuard(x_example, {int64_t{2}, std::string("s0")}, {std::string("s1"), int64_t{1}}, "x");
  Ref y_example(Wrap(Strided({16, 3}, {1, 16})));
  root.DictGetItemManager(Ref(PyUnicode_FromString("y")), "L['y']")
      ->AddTensorMatchGuard(y_example, {std::string("s0"), std::string("s2")},
                            {int64_t{1}, GuardManager::StrideTimesSize{0}}, "y");
  auto locals = [&](Tensor x, Tensor y) {
    PyObject* d = TensorLocals(std::move(x));
    PyDict_SetItemString(d, "y", Ref(Wrap(std::move(y))));
    return d;
  };
  EXPECT_TRUE(root.Check(Ref(locals(Strided({2, 16}, {17, 1}), Strided({16, 3}, {1, 16})))));
  EXPECT_TRUE(root.Check(Ref(locals(Strided({2, 16}, {40, 1}), Strided({16, 5}, {1, 16})))));
  EXPECT_TRUE(root.Check(Ref(locals(Strided({2, 9}, {9, 1}), Strided({9, 5}, {1, 9})))));
  EXPECT_EQ(Why(root, Ref(locals(Strided({2, 16}, {17, 1}), Strided({16, 3}, {1, 17})))),
            "TENSOR_MATCH: check_tensor(L['y'], PyCapsule, DispatchKeySet(CPU), kiln.float32, device=cpu, "
            "requires_grad=False, size=[s0, s2], stride=[1, stride[0]*size[0]]) -- stride mismatch at index 1: "
            "expected 16, actual 17  # y");
  EXPECT_NE(Why(root, Ref(locals(Strided({2, 16}, {17, 2}), Strided({16, 3}, {1, 16})))).find(
                "stride mismatch at index 1: expected 1, actual 2"),
            std::string::npos);
  EXPECT_NE(Why(root, Ref(locals(Strided({2, 16}, {17, 1}), Strided({9, 3}, {1, 9})))).find(
                "size 0 is 9, but s0 = 16 from an earlier guard"),
            std::string::npos);
}

TEST_F(GuardsTest, TensorMatchRefusesAStrideDerivedFromItself) {
  RootGuardManager root(globals_);
  Ref example(Wrap(Cpu({4, 3})));
  GuardManager* x = root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']");
  EXPECT_THROW(x->AddTensorMatchGuard(example, {int64_t{4}, int64_t{3}}, {GuardManager::StrideTimesSize{0}, int64_t{1}},
                                      "x"),
               ValueError);
  EXPECT_THROW(x->AddTensorMatchGuard(example, {int64_t{4}, int64_t{3}}, {GuardManager::StrideTimesSize{2}, int64_t{1}},
                                      "x"),
               ValueError);
}

TEST_F(GuardsTest, ShapeEnvGuardsRunOverBoundSymbols) {
  auto env = fx::ShapeEnv::Create();
  SymInt s0 = env->CreateSymbol(8, "L['x'].size()[0]");
  ASSERT_EQ(s0.str(), "s0");
  EXPECT_TRUE(s0.sym_gt(2).guard_bool("", 0));
  EXPECT_TRUE(s0.mod(4).sym_eq(0).guard_bool("", 0));
  RootGuardManager root(globals_);
  Ref example(Wrap(Cpu({8})));
  root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']")
      ->AddTensorMatchGuard(example, {std::string("s0")}, {kContiguous}, "x");
  root.SetShapeEnv(env, "shape env");
  auto check = [&](int64_t n) { return root.Check(Ref(TensorLocals(Cpu({n})))); };
  EXPECT_TRUE(check(8));
  EXPECT_TRUE(check(4));
  EXPECT_TRUE(check(12));
  EXPECT_FALSE(check(6));   // Mod(6, 4) != 0
  EXPECT_FALSE(check(0));   // s0 > 2
  EXPECT_FALSE(check(1));
  EXPECT_EQ(Why(root, Ref(TensorLocals(Cpu({6})))), "SHAPE_ENV: Eq(Mod(s0, 4), 0) -- s0 = 6  # shape env");
  std::string tree = root.Str();
  EXPECT_NE(tree.find("| +- SHAPE_ENV: s0 > 2  # shape env\n"), std::string::npos) << tree;
  EXPECT_NE(tree.find("| +- SHAPE_ENV: Eq(Mod(s0, 4), 0)  # shape env\n"), std::string::npos) << tree;
}

TEST_F(GuardsTest, ShapeEnvWithAnUnboundSymbolFailsWithoutThrowing) {
  auto env = fx::ShapeEnv::Create();
  SymInt s0 = env->CreateSymbol(8, "L['x'].size()[0]");
  EXPECT_TRUE(s0.sym_gt(2).guard_bool("", 0));
  RootGuardManager root(globals_);
  root.SetShapeEnv(env, "shape env");
  Ref empty(Locals("{}"));
  EXPECT_FALSE(root.Check(empty));
  EXPECT_NE(Why(root, empty).find("SHAPE_ENV -- "), std::string::npos);
}

TEST_F(GuardsTest, PrintsTheTreeTorchStyle) {
  RootGuardManager root(globals_);
  root.AddGlobalStateGuard("");
  GuardManager* x = root.DictGetItemManager(Ref(PyUnicode_FromString("x")), "L['x']");
  Ref example(Wrap(Cpu({4, 3})));
  x->AddTensorMatchGuard(example, {std::string("s0"), int64_t{3}}, {kContiguous, int64_t{1}}, "x (from f.py:2)");
  GuardManager* b = root.DictGetItemManager(Ref(PyUnicode_FromString("b")), "L['b']");
  b->AddTypeMatchGuard(Ref(Eval("Box")), "");
  b->GetAttrManager(Ref(PyUnicode_FromString("w")), "L['b'].w")->AddLengthCheckGuard(2, "");
  root.GlobalsDictManager()->DictGetItemManager(Ref(PyUnicode_FromString("W")), "G['W']")
      ->AddEqualsMatchGuard(Ref(PyLong_FromLong(7)), "W (from f.py:3)");
  EXPECT_EQ(root.Str(),
            "TREE_GUARD_MANAGER:\n"
            "+- RootGuardManager\n"
            "| +- GLOBAL_STATE: grad_mode=True, default_dtype=kiln.float32\n"
            "| +- GuardManager: source=L['x'], accessed_by=DictGetItemGuardAccessor('x')\n"
            "| | +- TENSOR_MATCH: check_tensor(L['x'], PyCapsule, DispatchKeySet(CPU), kiln.float32, device=cpu, "
            "requires_grad=False, size=[s0, 3], stride=[None, 1])  # x (from f.py:2)\n"
            "| +- GuardManager: source=L['b'], accessed_by=DictGetItemGuardAccessor('b')\n"
            "| | +- TYPE_MATCH: type(L['b']) is Box\n"
            "| | +- GuardManager: source=L['b'].w, accessed_by=GetAttrGuardAccessor(w)\n"
            "| | | +- LENGTH_CHECK: len(L['b'].w) == 2\n"
            "| +- GuardManager: source=G, accessed_by=GlobalsGuardAccessor\n"
            "| | +- GuardManager: source=G['W'], accessed_by=DictGetItemGuardAccessor('W')\n"
            "| | | +- EQUALS_MATCH: G['W'] == 7  # W (from f.py:3)\n");
}

TEST_F(GuardsTest, BadArgumentsThrowTypedErrors) {
  RootGuardManager root(globals_);
  EXPECT_THROW(root.AddTypeMatchGuard(Ref(PyLong_FromLong(1)), ""), TypeError);
  EXPECT_THROW(root.AddLambdaGuard(Ref(PyLong_FromLong(1)), ""), TypeError);
  EXPECT_THROW(root.AddLengthCheckGuard(-1, ""), ValueError);
  EXPECT_THROW(root.GetItemManager(-1, ""), ValueError);
  EXPECT_THROW(root.GetAttrManager(Ref(PyLong_FromLong(1)), ""), TypeError);
  EXPECT_THROW(root.DictGetItemManager(Ref(Eval("[]")), ""), TypeError);
  EXPECT_THROW(root.AddDictKeysGuard(Ref(PyLong_FromLong(1)), ""), TypeError);
  EXPECT_THROW(root.AddTensorMatchGuard(Ref(PyLong_FromLong(1)), {}, {}, ""), TypeError);
  Ref example(Wrap(Cpu({4, 3})));
  EXPECT_THROW(root.AddTensorMatchGuard(example, {int64_t{4}}, {int64_t{1}}, ""), ValueError);
  Ref one(PyLong_FromLong(1));
  EXPECT_THROW({ RootGuardManager bad(one); }, TypeError);
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(GuardsTest, NoUnwrapperMeansNotARootGuardManager) {
  Ref fn(Eval("is_positive"));
  EXPECT_EQ(AsRootGuardManager(fn), nullptr);
}

}  // namespace
}  // namespace kiln::dynamo
