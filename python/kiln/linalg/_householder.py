"""Householder reflectors composed from kiln ops: linalg.householder_product (LAPACK's orgqr) and the
QR factorisation in LAPACK's compact form (geqrf) that produces its arguments.

A reflector H = I - tau v v^T is stored as in LAPACK: v has a 1 at its own index i (not stored), zeros
above and A[i+1:, i] below. householder_product(A, tau) is the first n columns of
H_0 H_1 ... H_{k-1}, k = tau.size(-1), applied right to left to the identity, one rank-1 update per
reflector (a matmul and an outer product over the batch), so it is differentiable in A and tau
through the ops it is made of.

_geqrf follows LAPACK's dgeqr2 and dlarfg: for column i, with alpha = R[i, i] and x the entries below,
beta = -sign(alpha) ||(alpha, x)||, tau = (beta - alpha) / beta, v = x / (alpha - beta), and tau = 0
(H = I) when x is zero. It runs under no_grad (nn.utils.parametrizations.orthogonal's right_inverse is
its one user).
"""

import kiln

__all__ = ["householder_product"]


def _type_name(dtype):
    from kiln._composites import _type_name as name

    return name(dtype)


def _check_householder_arguments(input, tau):
    op = "torch.linalg.householder_product"
    if input.dim() < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    if input.size(-2) < input.size(-1):
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if input.size(-1) < tau.size(-1):
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if input.dim() - tau.dim() != 1:
        raise RuntimeError(f"{op}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.dim()} and input.ndim is equal to {input.dim()}")
    if input.dim() > 2 and tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype != input.dtype:
        raise RuntimeError(f"{op}: tau dtype {_type_name(tau.dtype)} does not match input dtype "
                           f"{_type_name(input.dtype)}")
    if input.dtype not in (kiln.float32, kiln.float64):
        raise NotImplementedError(f"\"orgqr_cpu\" not implemented for '{_type_name(input.dtype)}'")


def _reflector(input, i):
    """The (..., m) vector v of reflector i: 0 above row i, 1 at row i, input[..., i+1:, i] below."""
    rows = kiln.arange(input.size(-2), device=input.device)
    below = input[..., :, i]
    return kiln.where(rows > i, below, (rows == i).to(input.dtype))


def householder_product(A, tau, *, out=None):
    """The first n columns of H_0 ... H_{k-1}, H_i = I - tau_i v_i v_i^T (torch.linalg.householder_product,
    LAPACK's orgqr) for the (..., m, n) A, m >= n, and (..., k) tau, k <= n."""
    _check_householder_arguments(A, tau)
    m, n = A.size(-2), A.size(-1)
    q = kiln.eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, n)
    if tau.size(-1) == 0:  # no reflector: the identity, still a function of A and tau (zero gradients)
        q = q + A * 0 + tau.sum(-1)[..., None, None] * 0
    for i in reversed(range(tau.size(-1))):
        v = _reflector(A, i)
        q = q - tau[..., i, None, None] * v.unsqueeze(-1) * (v.unsqueeze(-2) @ q)
    return q if out is None else out.copy_(q)


def _geqrf(input):
    """(a, tau) as LAPACK's geqrf leaves them: R on and above the diagonal, the reflectors' vectors
    below it, and their scalars tau (min(m, n) of them); batched over leading dimensions."""
    with kiln.no_grad():
        a = input.clone()
        m, n = a.size(-2), a.size(-1)
        taus = []
        for i in range(min(m, n)):
            alpha, x = a[..., i, i], a[..., i + 1:, i]
            x_norm = kiln.linalg.vector_norm(x, dim=-1) if m - i > 1 else kiln.zeros_like(alpha)
            reflects = x_norm != 0
            # beta = -sign(alpha) * hypot(alpha, x_norm), sign(0) = + as Fortran's SIGN
            beta = kiln.where(alpha >= 0, -1.0, 1.0) * (alpha * alpha + x_norm * x_norm).sqrt()
            safe_beta = kiln.where(reflects, beta, 1.0)
            tau = kiln.where(reflects, (beta - alpha) / safe_beta, 0.0)
            scale = kiln.where(reflects, 1.0 / kiln.where(reflects, alpha - beta, 1.0), 1.0)
            a[..., i + 1:, i] = x * scale.unsqueeze(-1)
            a[..., i, i] = kiln.where(reflects, beta, alpha)
            if i + 1 < n:  # apply H_i to the trailing columns
                v = _reflector(a, i)
                trailing = a[..., :, i + 1:]
                a[..., :, i + 1:] = trailing - tau[..., None, None] * v.unsqueeze(-1) * (v.unsqueeze(-2) @ trailing)
            taus.append(tau)
        tau = kiln.stack(taus, -1) if taus else a.new_zeros(*a.shape[:-2], 0)
    return a, tau
