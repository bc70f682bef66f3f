// inductor/ir/affine.cc: Affine arithmetic and printing (affine.h).
#include "inductor/ir/affine.h"

#include <algorithm>

#include "runtime/error.h"

namespace kiln::inductor::ir {

Affine Affine::Var(int v) {
  Affine a;
  a.terms_.emplace_back(v, 1);
  return a;
}

int64_t Affine::Coeff(int v) const {
  for (const auto& [var, c] : terms_)
    if (var == v) return c;
  return 0;
}

void Affine::AddTerm(int v, int64_t coeff) {
  if (coeff == 0) return;
  auto it = std::lower_bound(terms_.begin(), terms_.end(), v,
                             [](const std::pair<int, int64_t>& t, int var) { return t.first < var; });
  if (it != terms_.end() && it->first == v) {
    it->second += coeff;
    if (it->second == 0) terms_.erase(it);
  } else {
    terms_.insert(it, {v, coeff});
  }
}

Affine& Affine::operator+=(const Affine& other) {
  offset_ += other.offset_;
  for (const auto& [v, c] : other.terms_) AddTerm(v, c);
  return *this;
}

Affine Affine::operator+(const Affine& other) const {
  Affine out = *this;
  out += other;
  return out;
}

Affine Affine::Scaled(int64_t k) const {
  Affine out(offset_ * k);
  if (k == 0) return out;
  out.terms_ = terms_;
  for (auto& t : out.terms_) t.second *= k;
  return out;
}

uint64_t Affine::Hash() const {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(offset_);
  for (const auto& [v, c] : terms_) {
    h = (h ^ static_cast<uint64_t>(v + 2)) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(c)) * 1099511628211ull;
  }
  return h;
}

std::string Affine::ToString() const {
  std::string s;
  if (offset_ != 0 || terms_.empty()) s = std::to_string(offset_);
  for (const auto& [v, c] : terms_) {
    const std::string var = v == kReduced ? "r" : "d" + std::to_string(v);
    if (!s.empty()) s += c < 0 ? " - " : " + ";
    else if (c < 0) s += "-";
    const int64_t m = c < 0 ? -c : c;
    s += m == 1 ? var : std::to_string(m) + "*" + var;
  }
  return s;
}

Affine ElementOffset(const std::vector<Affine>& idx, const std::vector<int64_t>& strides) {
  KILN_CHECK(idx.size() == strides.size(), "ElementOffset: ", idx.size(), " indices for ", strides.size(),
             " strides");
  Affine out;
  for (size_t d = 0; d < idx.size(); ++d) out += idx[d].Scaled(strides[d]);
  return out;
}

}  // namespace kiln::inductor::ir
