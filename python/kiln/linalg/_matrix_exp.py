"""linalg.matrix_exp composed from kiln's matmul and solve: scaling and squaring with a Padé
approximant (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005,
Algorithm 2.3), so autograd differentiates it through its composition.

Note [Padé degree and scaling]
r_m(A) = q_m(A)^-1 p_m(A) approximates exp(A) to unit roundoff while the 1-norm of A stays below
theta_m (Higham's table: degrees 3, 5, 7, 9, 13 for float64; 3, 5, 7 for float32). The batch's
largest norm picks the lowest degree that suffices; past the largest theta each matrix is scaled by
2^-s (s = ceil(log2(norm / theta)), per matrix) and the approximant squared s times. The squarings
run max(s) times over the batch, a matrix whose own s is smaller keeping its value (a where), so one
sync (the largest norm) decides the Python control flow. float16/bfloat16 compute in float32.
PyTorch's CPU kernel uses Taylor polynomials of degree up to 18 instead (Bader, Blanes and Casas);
both are accurate to rounding, so the results agree to the dtype's precision, not bit for bit.
"""

import math

import kiln
from kiln.linalg import _type_name

__all__ = ["matrix_exp"]

# Padé coefficients b_0..b_m of p_m (q_m(x) = p_m(-x)), from Higham's paper
_PADE = {
    3: (120.0, 60.0, 12.0, 1.0),
    5: (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    9: (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0, 110880.0, 3960.0, 90.0,
        1.0),
    13: (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
         10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
# the largest 1-norm for which r_m is accurate to unit roundoff
_THETA = {
    kiln.float64: ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1), (7, 9.504178996162932e-1),
                   (9, 2.097847961257068e0), (13, 5.371920351148152e0)),
    kiln.float32: ((3, 4.258730016922831e-1), (5, 1.880152677804762e0), (7, 3.925724783138660e0)),
}


def _pade(A, degree):
    """(U, V) with p_m(A) = V + U and q_m(A) = V - U: U holds the odd powers, V the even ones."""
    b = _PADE[degree]
    eye = kiln.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape)
    A2 = A @ A
    if degree == 13:  # Higham's evaluation with A^2, A^4, A^6 only
        A4 = A2 @ A2
        A6 = A4 @ A2
        U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * eye)
        V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * eye
        return U, V
    powers = [eye, A2]
    while len(powers) <= degree // 2:
        powers.append(powers[-1] @ A2)
    odd = sum(b[2 * i + 1] * powers[i] for i in range(degree // 2 + 1))
    even = sum(b[2 * i] * powers[i] for i in range(degree // 2 + 1))
    return A @ odd, even


def matrix_exp(A):
    """exp(A) of each square matrix in A (Note [Padé degree and scaling])."""
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_exp: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_exp: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(A.dtype)}")
    if A.numel() == 0:
        return A.clone()
    compute = A if A.dtype in (kiln.float32, kiln.float64) else A.float()
    norms = compute.abs().sum(-2).amax(-1)  # the 1-norm of each matrix: the largest column sum
    largest = norms.max().item()
    thetas = _THETA[compute.dtype]
    degree = next((m for m, theta in thetas if largest <= theta), None)
    if degree is not None:
        U, V = _pade(compute, degree)
        return kiln.linalg.solve(V - U, V + U).to(A.dtype)
    degree, theta = thetas[-1]
    # s = ceil(log2(norm / theta)) per matrix (a non-finite norm squares nothing: its result is NaN anyway)
    squarings = (norms / theta).log2().ceil().clamp_min(0)
    squarings = kiln.where(squarings.isfinite(), squarings, kiln.zeros_like(squarings))
    most = int(squarings.max().item()) if math.isfinite(largest) else 0
    scaled = compute * kiln.exp2(-squarings).unsqueeze(-1).unsqueeze(-1)
    U, V = _pade(scaled, degree)
    result = kiln.linalg.solve(V - U, V + U)
    squarings = squarings.unsqueeze(-1).unsqueeze(-1)
    for i in range(most):
        result = kiln.where(squarings > i, result @ result, result)
    return result.to(A.dtype)
