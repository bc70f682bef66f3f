"""gradcheck / gradgradcheck: compare analytical gradients with central finite differences.

For each differentiable input element the numerical Jacobian column is (f(x + eps) - f(x - eps))
/ 2 eps; the analytical rows come from one autograd.grad call per output element. Inputs should
be float64 (float32 differences are too noisy for the default tolerances)."""

import itertools

import kiln


class GradcheckError(RuntimeError):
    pass


def _flat_outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, kiln.Tensor) and o.dtype.is_floating_point]


def _numerical_jacobian(fn, inputs, index, eps):
    # The input is perturbed in place through a detached alias (same storage) and `fn` is called
    # on the original inputs with grad mode as the caller has it: gradgradcheck's `fn` computes
    # gradients itself, so it needs inputs that require grad and grad mode on (as PyTorch).
    x = inputs[index]
    data = x.detach()
    positions = list(itertools.product(*(range(s) for s in x.shape)))  # row-major, like reshape(-1)
    columns = []
    for pos in positions:
        with kiln.no_grad():
            orig = data[pos].item()
            data[pos] = orig + eps
        plus = [o.detach().clone() for o in _flat_outputs(fn(*inputs))]
        with kiln.no_grad():
            data[pos] = orig - eps
        minus = [o.detach().clone() for o in _flat_outputs(fn(*inputs))]
        with kiln.no_grad():
            data[pos] = orig
        columns.append([((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)])
    return columns  # columns[i][k]: d output_k / d x_i, flattened


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_backward_ad=True, fast_mode=False, masked=None):
    """True when every analytical gradient matches finite differences; else raises GradcheckError
    (or returns False with raise_exception=False)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, kiln.Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    outputs = _flat_outputs(func(*inputs))
    for i in diff_idx:
        numerical = _numerical_jacobian(func, inputs, i, eps)
        for k, out in enumerate(outputs):
            n_out = out.numel()
            analytical = []
            for j in range(n_out):
                grad_out = kiln.zeros(n_out, dtype=out.dtype)
                grad_out[j] = 1.0
                outs = _flat_outputs(func(*inputs))
                (g,) = kiln.autograd.grad(outs[k], inputs[i], grad_out.view_as(outs[k]), allow_unused=True)
                analytical.append(kiln.zeros(inputs[i].numel(), dtype=out.dtype) if g is None else g.reshape(-1))
            for x_elem in range(inputs[i].numel()):
                num = numerical[x_elem][k]
                ana = kiln.stack([a[x_elem] for a in analytical]) if analytical else num
                if not bool(kiln.all((num - ana).abs() <= atol + rtol * num.abs())):
                    msg = (f"Jacobian mismatch for output {k} with respect to input {i},\n"
                           f"numerical:{num}\nanalytical:{ana}\n")
                    if raise_exception:
                        raise GradcheckError(msg)
                    return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  **kwargs):
    """gradcheck of the function x -> d(func(x) . v)/dx, with v random (or grad_outputs)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    outputs = _flat_outputs(func(*inputs))
    if grad_outputs is None:
        gen = kiln.Generator().manual_seed(0)
        grad_outputs = [kiln.randn(o.shape, dtype=o.dtype, generator=gen) for o in outputs]
    diff = [x for x in inputs if isinstance(x, kiln.Tensor) and x.requires_grad]

    def first_grads(*xs):
        outs = _flat_outputs(func(*xs))
        wanted = [x for x in xs if isinstance(x, kiln.Tensor) and x.requires_grad]
        gs = kiln.autograd.grad(outs, wanted, grad_outputs, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    del diff
    return gradcheck(first_grads, inputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)
