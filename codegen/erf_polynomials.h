// codegen/erf_polynomials.h: the f32 erf polynomials of fmath::Erf (Note [Inline erff] in
// float_math.inc), the erf of Inductor's kernels and of eager's. Coefficients ascending.
#pragma once

namespace kiln::codegen {

// |x| < kErfNearLimit: erf(x) = x + x * q(x^2).
inline constexpr double kErfNearLimit = 0.921875;
inline constexpr double kErfNear[] = {0.1283791519, -0.3761250624, 0.1128193099, -0.0267703357, 0.004998124233,
                                      -0.0006013924442};
// above: erf(x) = 1 - e^(-x^2) * c(|x| - kErfFarCentre), |x| clamped to kErfFarClamp.
inline constexpr double kErfFarCentre = 2.4;
inline constexpr double kErfFarClamp = 4.0;
inline constexpr double kErfFar[] = {0.2185000345, -0.0795762509, 0.02748547052, -0.009194636132, 0.002645440917,
                                     -0.0008860524183, 0.0005629879362, 0.0002353558531, 0.0001279985637};

}  // namespace kiln::codegen
