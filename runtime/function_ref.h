// runtime/function_ref.h: FunctionRef<R(Args...)>, a non-owning reference to a callable.
//
// For a function that calls a callback before it returns and keeps no copy of it (LLVM's
// function_ref, C++26's std::function_ref). Unlike a template parameter, the callee is compiled
// once rather than once per callback type; unlike std::function, passing a lambda allocates
// nothing and instantiates no manager or type info. The referenced callable must outlive the
// FunctionRef: take one as a parameter, never store one.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace kiln {

template <typename Fn>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f)  // NOLINT: converts implicitly, as std::function does
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* callable, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(callable))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

 private:
  void* callable_;
  R (*call_)(void*, Args...);
};

}  // namespace kiln
