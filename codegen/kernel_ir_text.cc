// codegen/kernel_ir_text.cc: reading the kernel IR's canonical text (Serialize, kernel_ir.cc) back
// into a Kernel, so tests can state kernels as golden text and a debug dump's output_code.py can
// rebuild its kernels without the lowering that made them.
//
//   kernel <name>
//   buffers <name>:<dtype> ...
//   outer <extent> ...
//   loop <extent>                       (one per loop, in order)
//     store <buffer>(<index>) <expr>    (the statements of the loop above, indented)
//     reduce <acc> <kind> <expr>
//     welford <acc> <expr>
//
// index: (offset;stride,stride,...,;inner stride). expr: L<buffer>(<index>) a load,
// C<dtype>:<value> a constant (floats in C's %a hex notation, integers in decimal), A<acc>,
// I<dim> (-1: the inner loop), cast<<dtype>>(<expr>), <op>(<expr>,...,) with a comma after each.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

class TextReader {
 public:
  explicit TextReader(const std::string& text) : text_(text) {}

  Kernel ReadKernel() {
    Kernel k;
    Keyword("kernel");
    Space();
    k.name = Word();
    Newline();
    Keyword("buffers");
    while (Peek() == ' ') {
      Space();
      Buffer b;
      b.name = Until(':');
      Expect(':');
      b.dtype = ReadDType();
      k.buffers.push_back(std::move(b));
    }
    Newline();
    Keyword("outer");
    while (Peek() == ' ') {
      Space();
      k.outer.push_back(Int());
    }
    while (pos_ < text_.size()) {
      Newline();
      Keyword("loop");
      Space();
      Loop loop;
      loop.extent = Int();
      while (pos_ + 2 < text_.size() && text_.compare(pos_, 3, "\n  ") == 0) {
        pos_ += 3;
        loop.stmts.push_back(ReadStmt());
      }
      k.loops.push_back(std::move(loop));
    }
    return k;
  }

  ExprPtr ReadWholeExpr() {
    ExprPtr e = ReadExpr();
    if (pos_ != text_.size()) Fail("text after the expression");
    return e;
  }

 private:
  Stmt ReadStmt() {
    Stmt s;
    const size_t at = pos_;
    std::string kind = Word();
    Space();
    if (kind == "store") {
      s.kind = Stmt::Kind::kStore;
      s.buffer = static_cast<int>(Int());
      s.index = ReadIndex();
    } else if (kind == "reduce") {
      s.kind = Stmt::Kind::kReduce;
      s.acc_id = static_cast<int>(Int());
      Space();
      const size_t name_at = pos_;
      std::string r = Word();
      if (!ParseReduce(r, &s.reduce)) Fail(StrCat("unknown reduction '", r, "'"), name_at);
    } else if (kind == "welford") {
      s.kind = Stmt::Kind::kWelford;
      s.acc_id = static_cast<int>(Int());
    } else {
      Fail(StrCat("expected store, reduce or welford, got '", kind, "'"), at);
    }
    Space();
    s.expr = ReadExpr();
    return s;
  }

  ExprPtr ReadExpr() {
    char c = Peek();
    if (c == 'L') {
      ++pos_;
      int buffer = static_cast<int>(Int());
      return Expr::Load(buffer, ReadIndex());
    }
    if (c == 'C') {
      ++pos_;
      DType t = ReadDType();
      Expect(':');
      const size_t value_at = pos_;
      std::string v = Until2(',', ')');
      if (IsFloatDType(t)) {
        errno = 0;
        char* end = nullptr;
        double d = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0') Fail(StrCat("bad float constant '", v, "'"), value_at);
        return Expr::Const(d, t);
      }
      return Expr::ConstInt(IntOf(v, value_at), t);
    }
    if (c == 'A') {
      ++pos_;
      return Expr::Acc(static_cast<int>(Int()));
    }
    if (c == 'I') {
      ++pos_;
      return Expr::LoopIndex(static_cast<int>(Int()));
    }
    const size_t name_at = pos_;
    std::string name = Until('(');
    if (name.rfind("cast<", 0) == 0 && name.size() > 6 && name.back() == '>') {
      DType t;
      std::string dtype = name.substr(5, name.size() - 6);
      if (!ParseDType(dtype, &t)) Fail(StrCat("unknown dtype '", dtype, "'"), name_at);
      Expect('(');
      ExprPtr inner = ReadExpr();
      Expect(')');
      return Expr::Cast(std::move(inner), t);
    }
    OpCode op;
    if (!ParseOp(name, &op)) Fail(StrCat("unknown operator '", name, "'"), name_at);
    Expect('(');
    std::vector<ExprPtr> args;
    while (Peek() != ')') {
      args.push_back(ReadExpr());
      Expect(',');
    }
    Expect(')');
    if (static_cast<int>(args.size()) != OpArity(op))
      Fail(StrCat("'", name, "' takes ", OpArity(op), " operands, got ", args.size()), name_at);
    return Expr::Op(op, std::move(args));
  }

  Index ReadIndex() {
    Index ix;
    Expect('(');
    ix.offset = Int();
    Expect(';');
    while (Peek() != ';') {
      ix.outer_strides.push_back(Int());
      Expect(',');
    }
    Expect(';');
    ix.inner_stride = Int();
    Expect(')');
    return ix;
  }

  DType ReadDType() {
    size_t start = pos_;
    while (pos_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string s = text_.substr(start, pos_ - start);
    DType t;
    if (!ParseDType(s, &t)) Fail(StrCat("unknown dtype '", s, "'"), start);
    return t;
  }

  int64_t Int() {
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return IntOf(text_.substr(start, pos_ - start), start);
  }

  int64_t IntOf(const std::string& s, size_t at = std::string::npos) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE) Fail(StrCat("expected an integer, got '", s, "'"), at);
    return v;
  }

  std::string Word() {
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (pos_ == start) Fail("expected a name");
    return text_.substr(start, pos_ - start);
  }

  std::string Until(char stop) {
    size_t end = text_.find(stop, pos_);
    size_t line_end = text_.find('\n', pos_);
    if (end == std::string::npos || end > line_end) Fail(StrCat("expected '", std::string(1, stop), "'"));
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end;
    return s;
  }

  std::string Until2(char a, char b) {
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != a && text_[pos_] != b && text_[pos_] != '\n') ++pos_;
    return text_.substr(start, pos_ - start);
  }

  void Keyword(const char* word) {
    std::string w = Word();
    if (w != word) Fail(StrCat("expected '", word, "', got '", w, "'"));
  }
  void Space() { Expect(' '); }
  void Newline() { Expect('\n'); }
  void Expect(char c) {
    if (Peek() != c) Fail(StrCat("expected '", c == '\n' ? std::string("\\n") : std::string(1, c), "'"));
    ++pos_;
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  [[noreturn]] void Fail(const std::string& what, size_t at = std::string::npos) const {
    if (at == std::string::npos) at = pos_;
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, column = 1;
      else ++column;
    }
    throw ValueError(StrCat("[inductor] kernel IR text, line ", line, ", column ", column, ": ", what));
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

Kernel ParseKernelText(const std::string& text) { return TextReader(text).ReadKernel(); }

ExprPtr ParseExprText(const std::string& text) { return TextReader(text).ReadWholeExpr(); }

}  // namespace kiln::codegen
