// fx/repr.cc: CPython-compatible reprs of graph constants.
#include "fx/repr.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace kiln::fx {

std::string PyFloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // The shortest round-tripping digits, then CPython's layout: fixed for 1e-4 <= |v| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e+02"
  size_t e = sci.find('e');
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string mant = sci.substr(0, e);
  bool neg = mant[0] == '-';
  if (neg) mant = mant.substr(1);
  std::string digits;
  for (char c : mant) if (c != '.') digits += c;
  std::string out;
  if (exp >= -5 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    // CPython uses exponent form below 1e-4.
    if (exp < -4) out.clear();
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ebuf;
  }
  return neg ? "-" + out : out;
}

std::string PyStringRepr(const std::string& s) {
  char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == quote) out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out + quote;
}

namespace {
std::string MemoryFormatRepr(MemoryFormat m) {
  switch (m) {
    case MemoryFormat::Contiguous: return "kiln.contiguous_format";
    case MemoryFormat::Preserve: return "kiln.preserve_format";
    case MemoryFormat::ChannelsLast: return "kiln.channels_last";
  }
  return "?";
}
template <typename T, typename F>
std::string ListRepr(const std::vector<T>& xs, F f) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + f(xs[i]);
  return s + "]";
}
}  // namespace

std::string ConstRepr(const IValue& v) {
  return std::visit([](const auto& x) -> std::string {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::monostate>) return "None";
    else if constexpr (std::is_same_v<T, bool>) return x ? "True" : "False";
    else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
    else if constexpr (std::is_same_v<T, double>) return PyFloatRepr(x);
    else if constexpr (std::is_same_v<T, std::complex<double>>) {  // Python's repr: (1+2j), 2j
      std::string im = PyFloatRepr(x.imag());
      if (im.size() > 2 && im.compare(im.size() - 2, 2, ".0") == 0) im.resize(im.size() - 2);
      if (x.real() == 0 && !std::signbit(x.real())) return im + "j";
      std::string re = PyFloatRepr(x.real());
      if (re.size() > 2 && re.compare(re.size() - 2, 2, ".0") == 0) re.resize(re.size() - 2);
      return "(" + re + (im[0] == '-' ? "" : "+") + im + "j)";
    }
    else if constexpr (std::is_same_v<T, SymInt>) return x.str();
    else if constexpr (std::is_same_v<T, std::string>) return PyStringRepr(x);
    else if constexpr (std::is_same_v<T, ScalarType>) return std::string("kiln.") + ScalarTypeName(x);
    else if constexpr (std::is_same_v<T, Device>) {
      Device d = x;
      std::string s = std::string("device(type='") + DeviceTypeName(d.type) + "'";
      if (d.index >= 0) s += ", index=" + std::to_string(d.index);
      return s + ")";
    }
    else if constexpr (std::is_same_v<T, Layout>) return "kiln.strided";
    else if constexpr (std::is_same_v<T, MemoryFormat>) return MemoryFormatRepr(x);
    else if constexpr (std::is_same_v<T, std::vector<SymInt>>) return ListRepr(x, [](const SymInt& i) { return i.str(); });
    else if constexpr (std::is_same_v<T, std::vector<double>>) return ListRepr(x, PyFloatRepr);
    else if constexpr (std::is_same_v<T, std::vector<bool>>) return ListRepr(x, [](bool b) { return std::string(b ? "True" : "False"); });
    else if constexpr (std::is_same_v<T, Tensor>) return "<tensor " + SizesToString(x->sym_sizes()) + ">";
    else return "<" + std::string(typeid(T).name()) + ">";
  }, v.variant());
}

bool ConstEqual(const IValue& a, const IValue& b) {
  if (a.variant().index() != b.variant().index()) return false;
  return std::visit([&](const auto& x) -> bool {
    using T = std::decay_t<decltype(x)>;
    const T& y = std::get<T>(b.variant());
    if constexpr (std::is_same_v<T, std::monostate>) return true;
    else if constexpr (std::is_same_v<T, Tensor>) return x.is_same(y);
    else if constexpr (std::is_same_v<T, SymInt>) return x.is_symbolic() || y.is_symbolic() ? x.node() == y.node() : x.expect_int() == y.expect_int();
    else if constexpr (std::is_same_v<T, std::vector<SymInt>>) {
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i].is_symbolic() || y[i].is_symbolic() ? x[i].node() != y[i].node() : x[i].expect_int() != y[i].expect_int()) return false;
      return true;
    }
    else if constexpr (std::is_same_v<T, Device>) return x.type == y.type && x.index == y.index;
    else if constexpr (std::is_same_v<T, Generator> || std::is_same_v<T, std::vector<Tensor>> || std::is_same_v<T, OptionalTensorList>) return false;
    else return x == y;
  }, a.variant());
}

}  // namespace kiln::fx
