"""nn.utils.parametrizations.orthogonal for kiln (re-exported by parametrizations.py): a matrix, or a
batch of them, kept (semi-)orthogonal by a parametrization, as PyTorch's _Orthogonal.

The unconstrained tensor X (of the weight's shape; a wide matrix is handled transposed, so n >= k) maps
to Q with orthonormal columns by one of:
  * "cayley": A = tril(X) - tril(X)^T, padded to (n, n), is skew-symmetric; Q = (I - A/2)^-1 (I + A/2)
    (one kiln.linalg_solve), its first k columns;
  * "householder": the reflectors stored below X's diagonal with tau = 2 / (1 + ||v||^2), so each is
    exactly orthogonal, multiplied by linalg.householder_product, columns signed by X's diagonal;
  * "matrix_exp" (PyTorch's default for square matrices): Q = exp(A) (kiln.linalg.matrix_exp, Padé
    scaling and squaring), its first k columns;
With use_trivialization (the default) Q is further multiplied by the buffer `base`, the orthogonal
matrix that assigning to the weight stores (right_inverse), and the original becomes -I: the
parametrization then starts exactly at the assigned value (Lezcano-Casado's dynamic trivialization).
Without it, assigning to a Householder weight stores the geqrf reflectors of the value.
"""

from enum import Enum, auto

import kiln
from kiln.linalg._householder import _geqrf
from kiln.nn.modules.module import Module
from kiln.nn.utils import parametrize


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _is_orthogonal(Q, eps=None):
    n, k = Q.size(-2), Q.size(-1)
    Id = kiln.eye(k, dtype=Q.dtype, device=Q.device)
    eps = 10.0 * n * kiln.finfo(Q.dtype).eps  # a reasonable eps, but not too large (PyTorch's)
    return kiln.allclose(Q.mT @ Q, Id, atol=eps)


def _make_orthogonal(A):
    """Q of the tall A = QR with R's diagonal non-negative (geqrf, then householder_product, signed)."""
    X, tau = _geqrf(A)
    Q = kiln.linalg.householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == _OrthMaps.householder:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = kiln.linalg.householder_product(A, tau)
            # the sign of each column: X's diagonal truncated to an integer, as PyTorch's .int()
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        else:
            X = X.tril()
            if n != k:
                X = kiln.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = kiln.linalg.matrix_exp(A)
            else:
                Id = kiln.eye(n, dtype=A.dtype, device=A.device)
                Q = kiln.linalg_solve(kiln.add(Id, A, alpha=-0.5), kiln.add(Id, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with kiln.no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.size(-2), Q.size(-1)
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                # the signs of R's diagonal, read back by forward's .int(); where tau = 0 the reflector
                # is the identity, so the sign flips (PyTorch's convention)
                diagonal = A.diagonal(dim1=-2, dim2=-1)
                diagonal.copy_(kiln.where(tau == 0.0, -diagonal.sign(), diagonal.sign()))
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # complete the columns with random ones, then orthogonalise
                N = kiln.randn(*(Q.size()[:-2] + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(kiln.cat([Q, N], dim=-1))
            self.base = Q
            neg_Id = kiln.zeros_like(Q_init)
            neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_Id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keeps module.<name> (a matrix or a batch of them) orthogonal: orthonormal columns when it is tall,
    rows when it is wide (torch.nn.utils.parametrizations.orthogonal)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, kiln.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:  # PyTorch's rule (kiln has no complex tensors)
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
