// inductor/ir/affine.h: affine indices over loop variables, the index language of the loop IR.
//
// A lazy value is read at one Affine per dimension: `offset + sum coeff * v` over the variables of
// the loop nest it is computed in. Variables are ints: 0.. for a value's own dimensions (a
// reduction's source: its kept dimensions), kReduced (-1) for a reduction's inner variable. Views
// (permute, expand, slice, select, unsqueeze) are affine maps of indices, so they never copy, and
// putting one body inside another is composition (Compose).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::inductor::ir {

inline constexpr int kReduced = -1;  // a reduction's inner loop variable (r)

class Affine {
 public:
  Affine() = default;
  explicit Affine(int64_t offset) : offset_(offset) {}
  static Affine Var(int v);

  int64_t offset() const { return offset_; }
  // (variable, coefficient) pairs, sorted by variable, no zero coefficient.
  const std::vector<std::pair<int, int64_t>>& terms() const { return terms_; }
  int64_t Coeff(int v) const;
  bool IsConst() const { return terms_.empty(); }

  Affine& operator+=(const Affine& other);
  Affine operator+(const Affine& other) const;
  Affine Scaled(int64_t k) const;
  void AddTerm(int v, int64_t coeff);

  // This index with every variable v replaced by vars(v) (an Affine over other variables).
  template <typename Vars>
  Affine Compose(const Vars& vars) const {
    Affine out(offset_);
    for (const auto& [v, c] : terms_) out += vars(v).Scaled(c);
    return out;
  }

  bool operator==(const Affine& o) const { return offset_ == o.offset_ && terms_ == o.terms_; }
  bool operator!=(const Affine& o) const { return !(*this == o); }
  uint64_t Hash() const;
  // "3 + 2*d0 + r": d<k> for dimension k, r for kReduced; "0" for the constant 0.
  std::string ToString() const;

 private:
  int64_t offset_ = 0;
  std::vector<std::pair<int, int64_t>> terms_;
};

// The element offset of per-dimension indices into memory of these strides: sum idx[d] * stride[d].
Affine ElementOffset(const std::vector<Affine>& idx, const std::vector<int64_t>& strides);

}  // namespace kiln::inductor::ir
