// tensor/dispatch_key.h: dispatch keys and the bit set the dispatcher picks a kernel from.
//
// Note [Dispatch key order]: a higher enum value is a higher priority. From the top:
// Functionalize -> Autocast -> Autograd -> Tracing (make_fx) -> Fake -> backends (Meta, CUDA, CPU). A call's
// key set is the union of its tensor arguments' keys, plus the thread's included keys, minus its
// excluded keys; the highest key with a kernel runs. A kernel that handles its layer re-dispatches
// with its own key (and those above) removed. Keys whose layer has nothing to do for an op fall
// through to the next one.
#pragma once

#include <cstdint>

namespace kiln {

enum class DispatchKey : uint8_t {
  Undefined = 0,
  CPU,
  CUDA,
  Meta,
  Fake,
  Tracing,
  Autograd,
  Autocast,  // mixed precision's casts (tensor/autocast.h), recorded by autograd and tracing below
  Functionalize,
  NumKeys,
};
constexpr int kNumDispatchKeys = static_cast<int>(DispatchKey::NumKeys);
const char* DispatchKeyName(DispatchKey k);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey k) : bits_(k == DispatchKey::Undefined ? 0 : Bit(k)) {}
  static constexpr DispatchKeySet FromBits(uint32_t bits) { DispatchKeySet s; s.bits_ = bits; return s; }
  // All keys strictly below k.
  static constexpr DispatchKeySet Below(DispatchKey k) { return FromBits(Bit(k) - 1); }

  constexpr bool has(DispatchKey k) const { return bits_ & Bit(k); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint32_t bits() const { return bits_; }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return FromBits(bits_ | o.bits_); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return FromBits(bits_ & o.bits_); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return FromBits(bits_ & ~o.bits_); }
  constexpr DispatchKeySet add(DispatchKey k) const { return *this | DispatchKeySet(k); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return *this - DispatchKeySet(k); }
  constexpr bool operator==(DispatchKeySet o) const { return bits_ == o.bits_; }
  DispatchKey highest() const {
    return bits_ == 0 ? DispatchKey::Undefined : static_cast<DispatchKey>(31 - __builtin_clz(bits_));
  }

 private:
  static constexpr uint32_t Bit(DispatchKey k) { return 1u << (static_cast<int>(k)); }
  uint32_t bits_ = 0;
};

// Thread-local keys added to / removed from every call's key set (modes like no_grad, make_fx).
struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};
LocalDispatchKeySet& TlsLocalDispatchKeySet();

class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKey k)
      : saved_(TlsLocalDispatchKeySet()) { TlsLocalDispatchKeySet().included = saved_.included.add(k); }
  ~IncludeDispatchKeyGuard() { TlsLocalDispatchKeySet().included = saved_.included; }
 private:
  LocalDispatchKeySet saved_;
};

class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKeySet ks)
      : saved_(TlsLocalDispatchKeySet()) { TlsLocalDispatchKeySet().excluded = saved_.excluded | ks; }
  ~ExcludeDispatchKeyGuard() { TlsLocalDispatchKeySet().excluded = saved_.excluded; }
 private:
  LocalDispatchKeySet saved_;
};

}  // namespace kiln
