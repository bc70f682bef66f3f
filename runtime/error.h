// runtime/error.h: kiln's typed errors and the checks that throw them.
//
// User errors are exceptions whose class picks the Python exception at the binding boundary
// (python/errors.cc): Error -> RuntimeError, ValueError, IndexError, TypeError,
// NotImplementedError, OverflowError. Messages read "[op] what was expected, what was given".
// KILN_INTERNAL_ASSERT is for invariants: when it fires, it is a bug in kiln, and says so.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ValueError : public Error {
 public:
  using Error::Error;
};
class IndexError : public Error {
 public:
  using Error::Error;
};
class TypeError : public Error {
 public:
  using Error::Error;
};
class NotImplementedError : public Error {
 public:
  using Error::Error;
};
class OverflowError : public Error {  // a Python int no Scalar holds (beyond -2^63 .. 2^64 - 1)
 public:
  using Error::Error;
};

// An error raised in Python as a RuntimeError subclass defined in Python, named by module and class
// ("kiln.linalg", "LinAlgError"); the binding boundary falls back to RuntimeError when the class
// cannot be imported.
class NamedError : public Error {
 public:
  NamedError(std::string module, std::string cls, const std::string& msg)
      : Error(msg), module_(std::move(module)), cls_(std::move(cls)) {}
  const std::string& python_module() const { return module_; }
  const std::string& python_class() const { return cls_; }

 private:
  std::string module_, cls_;
};

namespace detail {
inline void StreamAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void StreamAll(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  StreamAll(os, rest...);
}
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  StreamAll(os, args...);
  return os.str();
}
}  // namespace detail

using detail::StrCat;

[[noreturn]] void InternalAssertFailed(const char* cond, const char* file, int line,
                                       const std::string& msg);

}  // namespace kiln

#define KILN_CHECK_IMPL(ErrorType, cond, ...)                   \
  do {                                                          \
    if (__builtin_expect(!(cond), 0)) {                         \
      throw ::kiln::ErrorType(::kiln::StrCat(__VA_ARGS__));     \
    }                                                           \
  } while (0)

#define KILN_CHECK(cond, ...) KILN_CHECK_IMPL(Error, cond, __VA_ARGS__)
#define KILN_CHECK_VALUE(cond, ...) KILN_CHECK_IMPL(ValueError, cond, __VA_ARGS__)
#define KILN_CHECK_INDEX(cond, ...) KILN_CHECK_IMPL(IndexError, cond, __VA_ARGS__)
#define KILN_CHECK_TYPE(cond, ...) KILN_CHECK_IMPL(TypeError, cond, __VA_ARGS__)
#define KILN_CHECK_NOT_IMPLEMENTED(cond, ...) KILN_CHECK_IMPL(NotImplementedError, cond, __VA_ARGS__)

#define KILN_INTERNAL_ASSERT(cond, ...)                                                  \
  do {                                                                                   \
    if (__builtin_expect(!(cond), 0)) {                                                  \
      ::kiln::InternalAssertFailed(#cond, __FILE__, __LINE__, ::kiln::StrCat(__VA_ARGS__)); \
    }                                                                                    \
  } while (0)
