// codegen/kernel_ir.cc: names, validation, hashing, extents and the readable printer of the
// kernel IR (kernel_ir.h).
#include "codegen/kernel_ir.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <iterator>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "runtime/error.h"

namespace kiln::codegen {

// --- names -----------------------------------------------------------------------------------

namespace {
constexpr const char* kDTypeNames[] = {"f32", "f64", "i64", "i32", "bool", "bf16", "f16", "i16", "i8", "u8"};
constexpr int kNumDTypes = sizeof(kDTypeNames) / sizeof(kDTypeNames[0]);
constexpr const char* kOpNames[] = {
    "neg", "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf",
    "gelu", "normal_cdf", "floor", "ceil", "round", "trunc", "reciprocal", "relu", "logical_not", "sign",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc", "lgamma", "exp2", "log2",
    "log10", "signbit", "bitwise_not",
    "add", "sub", "mul", "div", "floordiv", "mod", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "atan2", "fmod", "hypot", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor",
    "lshift", "rshift", "gelu_backward", "where"};
constexpr int kNumOps = sizeof(kOpNames) / sizeof(kOpNames[0]);
constexpr const char* kReduceNames[] = {"sum", "max", "min", "prod", "argmax", "argmin", "max_last", "min_last"};
}  // namespace

const char* DTypeName(DType t) { return kDTypeNames[static_cast<int>(t)]; }
bool ParseDType(const std::string& s, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == kDTypeNames[i]) { *out = static_cast<DType>(i); return true; }
  return false;
}
int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::Bool: case DType::I8: case DType::U8: return 1;
    case DType::BF16: case DType::F16: case DType::I16: return 2;
  }
  return 0;
}
DType ComputeDType(DType t) {
  switch (t) {
    case DType::BF16: case DType::F16: return DType::F32;
    case DType::I32: case DType::I16: case DType::I8: case DType::U8: return DType::I64;
    default: return t;
  }
}

const char* OpName(OpCode op) { return kOpNames[static_cast<int>(op)]; }
bool ParseOp(const std::string& s, OpCode* out) {
  for (int i = 0; i < kNumOps; ++i)
    if (s == kOpNames[i]) { *out = static_cast<OpCode>(i); return true; }
  return false;
}
int OpArity(OpCode op) {
  if (op == OpCode::kWhere) return 3;
  return op >= OpCode::kAdd ? 2 : 1;
}
int OpCost(OpCode op) {
  switch (op) {
    case OpCode::kNeg: case OpCode::kAbs: case OpCode::kFloor: case OpCode::kCeil: case OpCode::kRound:
    case OpCode::kTrunc: case OpCode::kRelu: case OpCode::kLogicalNot: case OpCode::kSign: case OpCode::kSignbit:
    case OpCode::kBitNot: case OpCode::kAdd: case OpCode::kSub: case OpCode::kMul: case OpCode::kMax:
    case OpCode::kMin: case OpCode::kEq: case OpCode::kNe: case OpCode::kLt: case OpCode::kLe: case OpCode::kGt:
    case OpCode::kGe: case OpCode::kLogicalAnd: case OpCode::kLogicalOr: case OpCode::kCopysign:
    case OpCode::kBitAnd: case OpCode::kBitOr: case OpCode::kBitXor: case OpCode::kShl: case OpCode::kShr:
    case OpCode::kWhere:
      return 1;
    default:  // exp, log, ..., lgamma; div, reciprocal, floordiv, mod, fmod, pow; gelu and its backward
      return 4;
  }
}
const char* ReduceName(ReduceKind k) { return kReduceNames[static_cast<int>(k)]; }
bool ParseReduce(const std::string& s, ReduceKind* out) {
  for (int i = 0; i < static_cast<int>(std::size(kReduceNames)); ++i)
    if (s == kReduceNames[i]) { *out = static_cast<ReduceKind>(i); return true; }
  return false;
}

// --- constructors ----------------------------------------------------------------------------

ExprPtr Expr::Load(int buffer, Index index) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kLoad; e->buffer = buffer; e->index = std::move(index);
  return e;
}
ExprPtr Expr::Const(double v, DType dtype) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kConst; e->dtype = dtype; e->value = v;
  e->int_value = std::isfinite(v) ? static_cast<int64_t>(v) : 0;
  return e;
}
ExprPtr Expr::ConstInt(int64_t v, DType dtype) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kConst; e->dtype = dtype; e->value = static_cast<double>(v); e->int_value = v;
  return e;
}
ExprPtr Expr::Acc(int acc_id) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kAcc; e->acc_id = acc_id;
  return e;
}
ExprPtr Expr::LoopIndex(int dim) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kIndex; e->dim = dim;
  return e;
}
ExprPtr Expr::Op(OpCode op, std::vector<ExprPtr> args) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kOp; e->op = op; e->args = std::move(args);
  return e;
}
ExprPtr Expr::Cast(ExprPtr a, DType dtype) {
  auto e = std::make_shared<Expr>();
  e->kind = Kind::kCast; e->dtype = dtype; e->args = {std::move(a)};
  return e;
}

// --- validation ------------------------------------------------------------------------------

namespace {

struct Validator {
  const Kernel& k;
  std::vector<int> defined_in;  // acc id -> loop that reduces it (-1: none)

  std::string Where(size_t loop) const { return StrCat("[inductor.compile] kernel '", k.name, "', loop ", loop, ": "); }

  void CheckIndex(const Index& ix, size_t loop) const {
    KILN_CHECK_VALUE(ix.outer_strides.size() == k.outer.size(), Where(loop), "an index has ", ix.outer_strides.size(),
                     " outer strides, expected one per outer dim (", k.outer.size(), ")");
  }
  void CheckBuffer(int b, size_t loop) const {
    KILN_CHECK_VALUE(b >= 0 && b < static_cast<int>(k.buffers.size()), Where(loop), "buffer index ", b,
                     " out of range (", k.buffers.size(), " buffers)");
  }
  void CheckExpr(const ExprPtr& e, size_t loop) const {
    KILN_CHECK_VALUE(e != nullptr, Where(loop), "missing expression");
    switch (e->kind) {
      case Expr::Kind::kLoad: CheckBuffer(e->buffer, loop); CheckIndex(e->index, loop); break;
      case Expr::Kind::kConst: break;
      case Expr::Kind::kAcc:
        KILN_CHECK_VALUE(e->acc_id >= 0 && e->acc_id < static_cast<int>(defined_in.size()) &&
                             defined_in[e->acc_id] >= 0 && defined_in[e->acc_id] < static_cast<int>(loop),
                         Where(loop), "accumulator ", e->acc_id, " is read before an earlier loop reduces it");
        break;
      case Expr::Kind::kIndex:
        KILN_CHECK_VALUE(e->dim >= -1 && e->dim < static_cast<int>(k.outer.size()), Where(loop), "index dim ", e->dim,
                         " out of range (", k.outer.size(), " outer dims; -1 is the inner loop)");
        break;
      case Expr::Kind::kOp:
        KILN_CHECK_VALUE(static_cast<int>(e->args.size()) == OpArity(e->op), Where(loop), "'", OpName(e->op), "' takes ",
                         OpArity(e->op), " operands, got ", e->args.size());
        for (const auto& a : e->args) CheckExpr(a, loop);
        break;
      case Expr::Kind::kCast:
        KILN_CHECK_VALUE(e->args.size() == 1, Where(loop), "cast takes one operand");
        CheckExpr(e->args[0], loop);
        break;
    }
  }
};

}  // namespace

void Validate(const Kernel& k) {
  KILN_CHECK_VALUE(!k.name.empty(), "[inductor.compile] a kernel needs a name");
  for (char c : k.name)
    KILN_CHECK_VALUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_', "[inductor.compile] kernel name '", k.name,
                     "' must be an identifier");
  for (int64_t n : k.outer) KILN_CHECK_VALUE(n >= 0, "[inductor.compile] kernel '", k.name, "': negative outer extent ", n);
  Validator v{k, {}};
  for (size_t l = 0; l < k.loops.size(); ++l) {
    const Loop& loop = k.loops[l];
    KILN_CHECK_VALUE(loop.extent >= 0, v.Where(l), "negative extent ", loop.extent);
    for (const Stmt& s : loop.stmts) {
      v.CheckExpr(s.expr, l);
      if (s.kind == Stmt::Kind::kStore) {
        v.CheckBuffer(s.buffer, l);
        v.CheckIndex(s.index, l);
        continue;
      }
      int n = s.kind == Stmt::Kind::kWelford ? 3 : 1;
      KILN_CHECK_VALUE(s.acc_id >= 0 && s.acc_id < (1 << 20), v.Where(l), "bad accumulator id ", s.acc_id);
      if (static_cast<int>(v.defined_in.size()) < s.acc_id + n) v.defined_in.resize(s.acc_id + n, -1);
      for (int j = 0; j < n; ++j) {
        KILN_CHECK_VALUE(v.defined_in[s.acc_id + j] < 0, v.Where(l), "accumulator ", s.acc_id + j, " is reduced twice");
        v.defined_in[s.acc_id + j] = static_cast<int>(l);
      }
    }
  }
}

// --- hashing ---------------------------------------------------------------------------------

namespace {

void SerIndex(std::ostringstream& os, const Index& ix) {
  os << "(" << ix.offset << ";";
  for (int64_t s : ix.outer_strides) os << s << ",";
  os << ";" << ix.inner_stride << ")";
}

std::string HexDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return buf;
}

void SerExpr(std::ostringstream& os, const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLoad: os << "L" << e.buffer; SerIndex(os, e.index); break;
    case Expr::Kind::kConst:
      os << "C" << DTypeName(e.dtype) << ":";
      if (IsFloatDType(e.dtype)) os << HexDouble(e.value); else os << e.int_value;
      break;
    case Expr::Kind::kAcc: os << "A" << e.acc_id; break;
    case Expr::Kind::kIndex: os << "I" << e.dim; break;
    case Expr::Kind::kOp:
      os << OpName(e.op) << "(";
      for (const auto& a : e.args) { SerExpr(os, *a); os << ","; }
      os << ")";
      break;
    case Expr::Kind::kCast: os << "cast<" << DTypeName(e.dtype) << ">("; SerExpr(os, *e.args[0]); os << ")"; break;
  }
}

}  // namespace

std::string Serialize(const Kernel& k) {
  std::ostringstream os;
  os << "kernel " << k.name << "\nbuffers";
  for (const auto& b : k.buffers) os << " " << b.name << ":" << DTypeName(b.dtype);
  os << "\nouter";
  for (int64_t n : k.outer) os << " " << n;
  for (const auto& loop : k.loops) {
    os << "\nloop " << loop.extent;
    for (const auto& s : loop.stmts) {
      os << "\n  ";
      switch (s.kind) {
        case Stmt::Kind::kStore: os << "store " << s.buffer; SerIndex(os, s.index); break;
        case Stmt::Kind::kReduce: os << "reduce " << s.acc_id << " " << ReduceName(s.reduce); break;
        case Stmt::Kind::kWelford: os << "welford " << s.acc_id; break;
      }
      os << " ";
      SerExpr(os, *s.expr);
    }
  }
  return os.str();
}

std::string SerializeExpr(const Expr& e) {
  std::ostringstream os;
  SerExpr(os, e);
  return os.str();
}

std::string HashString(const std::string& s) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : s) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ c) * 0x100000001b3ull;
    h2 ^= h2 >> 29;
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64 "%016" PRIx64, h1, h2);
  return buf;
}

std::string HashKernel(const Kernel& k) { return HashString(Serialize(k)); }

// --- expressions as values ------------------------------------------------------------------

namespace {

bool IndexEqual(const Index& a, const Index& b) {
  return a.offset == b.offset && a.inner_stride == b.inner_stride && a.outer_strides == b.outer_strides;
}

uint64_t Mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

}  // namespace

bool ExprEqual(const Expr& a, const Expr& b) {
  if (&a == &b) return true;
  if (a.kind != b.kind || a.args.size() != b.args.size()) return false;
  switch (a.kind) {
    case Expr::Kind::kLoad: return a.buffer == b.buffer && IndexEqual(a.index, b.index);
    case Expr::Kind::kConst:
      // the canonical text's notion: floats by their bits (so NaN equals NaN, -0. differs from 0.)
      if (a.dtype != b.dtype) return false;
      if (IsFloatDType(a.dtype)) return std::memcmp(&a.value, &b.value, sizeof(double)) == 0;
      return a.int_value == b.int_value;
    case Expr::Kind::kAcc: return a.acc_id == b.acc_id;
    case Expr::Kind::kIndex: return a.dim == b.dim;
    case Expr::Kind::kOp: if (a.op != b.op) return false; break;
    case Expr::Kind::kCast: if (a.dtype != b.dtype) return false; break;
  }
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!ExprEqual(*a.args[i], *b.args[i])) return false;
  return true;
}

uint64_t ExprHash(const Expr& e) {
  uint64_t h = Mix(0xcbf29ce484222325ull, static_cast<uint64_t>(e.kind));
  switch (e.kind) {
    case Expr::Kind::kLoad:
      h = Mix(Mix(Mix(h, e.buffer), e.index.offset), e.index.inner_stride);
      for (int64_t s : e.index.outer_strides) h = Mix(h, s);
      break;
    case Expr::Kind::kConst: {
      uint64_t bits = 0;
      if (IsFloatDType(e.dtype)) std::memcpy(&bits, &e.value, sizeof(double));
      else bits = static_cast<uint64_t>(e.int_value);
      h = Mix(Mix(h, static_cast<uint64_t>(e.dtype)), bits);
      break;
    }
    case Expr::Kind::kAcc: h = Mix(h, e.acc_id); break;
    case Expr::Kind::kIndex: h = Mix(h, static_cast<uint64_t>(e.dim)); break;
    case Expr::Kind::kOp: h = Mix(h, static_cast<uint64_t>(e.op)); break;
    case Expr::Kind::kCast: h = Mix(h, static_cast<uint64_t>(e.dtype)); break;
  }
  for (const ExprPtr& a : e.args) h = Mix(h, ExprHash(*a));
  return h;
}

int ExprCost(const Expr& e) {
  int cost = e.kind == Expr::Kind::kOp ? OpCost(e.op) : 0;
  for (const ExprPtr& a : e.args) cost += ExprCost(*a);
  return cost;
}

ExprPtr SubstituteLoads(const ExprPtr& e, const std::vector<ExprPtr>& args) {
  return MapLoads(e, [&](const ExprPtr& load) {
    KILN_CHECK_VALUE(load->buffer >= 0 && static_cast<size_t>(load->buffer) < args.size(),
                     "[inductor] an element function reads operand ", load->buffer, " of ", args.size());
    return args[load->buffer];
  });
}

// --- extents ---------------------------------------------------------------------------------

namespace {

void AddExtent(Extent& ext, const Index& ix, const Kernel& k, int64_t inner_extent) {
  int64_t lo = ix.offset, hi = ix.offset;
  for (size_t d = 0; d < k.outer.size(); ++d) {
    if (k.outer[d] == 0) return;  // no iteration touches anything
    int64_t span = ix.outer_strides[d] * (k.outer[d] - 1);
    (span < 0 ? lo : hi) += span;
  }
  if (inner_extent == 0) return;
  int64_t span = ix.inner_stride * (inner_extent - 1);
  (span < 0 ? lo : hi) += span;
  if (ext.max < ext.min) { ext.min = lo; ext.max = hi; return; }
  ext.min = std::min(ext.min, lo);
  ext.max = std::max(ext.max, hi);
}

}  // namespace

std::vector<Extent> BufferExtents(const Kernel& k) {
  std::vector<Extent> out(k.buffers.size());
  for (const auto& loop : k.loops)
    for (const auto& s : loop.stmts) {
      if (s.kind == Stmt::Kind::kStore) {
        AddExtent(out[s.buffer], s.index, k, loop.extent);
        out[s.buffer].written = true;
      }
      ForEachExpr(*s.expr, [&](const Expr& e) {
        if (e.kind == Expr::Kind::kLoad) AddExtent(out[e.buffer], e.index, k, loop.extent);
      });
    }
  return out;
}

// --- the readable listing --------------------------------------------------------------------

namespace {

struct Printer {
  const Kernel& k;
  std::ostringstream os;

  std::string Var(int dim) const { return dim < 0 ? "r" : StrCat("i", dim); }

  std::string IndexText(const Index& ix) const {
    std::string s;
    auto term = [&](int64_t stride, const std::string& var) {
      if (stride == 0) return;
      std::string t = stride == 1 ? var : StrCat(stride, "*", var);
      if (s.empty()) s = t;
      else if (stride < 0) s += StrCat(" - ", stride == -1 ? var : StrCat(-stride, "*", var));
      else s += " + " + t;
    };
    for (size_t d = 0; d < ix.outer_strides.size(); ++d) term(ix.outer_strides[d], Var(static_cast<int>(d)));
    term(ix.inner_stride, "r");
    if (ix.offset != 0 || s.empty()) s = s.empty() ? StrCat(ix.offset) : StrCat(ix.offset, " + ", s);
    return s;
  }

  std::string ConstText(const Expr& e) const {
    if (!IsFloatDType(e.dtype)) return e.dtype == DType::Bool ? (e.int_value ? "true" : "false") : StrCat(e.int_value);
    if (std::isnan(e.value)) return "NAN";
    if (std::isinf(e.value)) return e.value > 0 ? "INFINITY" : "-INFINITY";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", e.value);
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    if (e.dtype == DType::F32 || e.dtype == DType::BF16) s += "f";
    return s;
  }

  std::string ExprText(const Expr& e) const {
    switch (e.kind) {
      case Expr::Kind::kLoad: return StrCat(k.buffers[e.buffer].name, "[", IndexText(e.index), "]");
      case Expr::Kind::kConst: return ConstText(e);
      case Expr::Kind::kAcc: return StrCat("acc", e.acc_id);
      case Expr::Kind::kIndex: return Var(e.dim);
      case Expr::Kind::kCast: return StrCat("(", DTypeName(e.dtype), ")(", ExprText(*e.args[0]), ")");
      case Expr::Kind::kOp: break;
    }
    auto a = [&](int i) { return ExprText(*e.args[i]); };
    auto infix = [&](const char* op) { return StrCat("(", a(0), " ", op, " ", a(1), ")"); };
    switch (e.op) {
      case OpCode::kNeg: return StrCat("-", a(0));
      case OpCode::kAdd: return infix("+");
      case OpCode::kSub: return infix("-");
      case OpCode::kMul: return infix("*");
      case OpCode::kDiv: return infix("/");
      case OpCode::kEq: return infix("==");
      case OpCode::kNe: return infix("!=");
      case OpCode::kLt: return infix("<");
      case OpCode::kLe: return infix("<=");
      case OpCode::kGt: return infix(">");
      case OpCode::kGe: return infix(">=");
      case OpCode::kLogicalAnd: return infix("&&");
      case OpCode::kLogicalOr: return infix("||");
      case OpCode::kLogicalNot: return StrCat("!", a(0));
      case OpCode::kWhere: return StrCat("(", a(0), " ? ", a(1), " : ", a(2), ")");
      default: break;
    }
    std::string s = StrCat(OpName(e.op), "(");
    for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + ExprText(*e.args[i]);
    return s + ")";
  }

  static const char* Identity(ReduceKind r) {
    switch (r) {
      case ReduceKind::kSum: return "0";
      case ReduceKind::kProd: return "1";
      case ReduceKind::kMax: case ReduceKind::kArgmax: case ReduceKind::kMaxLast: return "-INFINITY";
      case ReduceKind::kMin: case ReduceKind::kArgmin: case ReduceKind::kMinLast: return "INFINITY";
    }
    return "?";
  }

  void Print() {
    os << "// " << HashKernel(k) << "\n";
    os << "void " << k.name << "(";
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      DType t = k.buffers[b].dtype;
      const char* ct = t == DType::F32 ? "float" : t == DType::F64 ? "double" : t == DType::I64 ? "int64_t"
                     : t == DType::I32 ? "int32_t" : t == DType::Bool ? "bool" : "bfloat16";
      os << (b ? ", " : "") << ct << "* " << k.buffers[b].name;
    }
    os << ") {\n";
    std::string ind = "  ";
    for (size_t d = 0; d < k.outer.size(); ++d) {
      os << ind << (d == 0 ? "#pragma omp parallel for\n" + ind : "") << "for (int64_t i" << d << " = 0; i" << d
         << " < " << k.outer[d] << "; ++i" << d << ") {\n";
      ind += "  ";
    }
    // accumulator declarations
    for (const auto& loop : k.loops)
      for (const auto& s : loop.stmts) {
        if (s.kind == Stmt::Kind::kReduce) {
          os << ind << "acc" << s.acc_id << " = " << Identity(s.reduce) << ";";
          if (s.reduce == ReduceKind::kArgmax || s.reduce == ReduceKind::kArgmin) os << "  // (value, index)";
          os << "\n";
        } else if (s.kind == Stmt::Kind::kWelford) {
          os << ind << "acc" << s.acc_id << " = acc" << s.acc_id + 1 << " = acc" << s.acc_id + 2
             << " = 0;  // welford mean, m2, count\n";
        }
      }
    for (const auto& loop : k.loops) {
      os << ind << "#pragma omp simd\n" << ind << "for (int64_t r = 0; r < " << loop.extent << "; ++r) {\n";
      for (const auto& s : loop.stmts) {
        os << ind << "  ";
        switch (s.kind) {
          case Stmt::Kind::kStore:
            os << k.buffers[s.buffer].name << "[" << IndexText(s.index) << "] = " << ExprText(*s.expr) << ";\n";
            break;
          case Stmt::Kind::kReduce:
            os << "acc" << s.acc_id << " = " << ReduceName(s.reduce) << "(acc" << s.acc_id << ", "
               << ExprText(*s.expr) << ");\n";
            break;
          case Stmt::Kind::kWelford:
            os << "welford(acc" << s.acc_id << ", acc" << s.acc_id + 1 << ", acc" << s.acc_id + 2 << ", "
               << ExprText(*s.expr) << ");\n";
            break;
        }
      }
      os << ind << "}\n";
    }
    for (size_t d = k.outer.size(); d-- > 0;) {
      ind.resize(ind.size() - 2);
      os << ind << "}\n";
    }
    os << "}\n";
  }
};

}  // namespace

std::string PrintKernel(const Kernel& k) {
  Printer p{k, {}};
  p.Print();
  return p.os.str();
}

}  // namespace kiln::codegen
