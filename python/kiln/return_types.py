"""kiln.return_types: the named results of kiln's Python-composed ops, as torch.return_types.

Ops in the registry get their result types from C++ (structseqs made per op in
python/csrc/arg_parser.cc). The order statistics composed in Python (kiln/_order_stats.py, kthvalue and aminmax in
kiln/_index_ops_more.py), frexp (kiln/_pointwise_more.py) and
kiln.linalg.lu, lstsq and ldl_factor(_ex) return the types defined here. Each is a tuple subclass with read-only named fields and a structseq's
attributes (n_fields, n_sequence_fields, __match_args__), so kiln._dynamo treats both kinds alike;
it keeps tuple's C constructor (one sequence), so rebuilding a result after a compiled graph runs
no Python frame. repr follows torch's: `kiln.return_types.median(\\nvalues=...,\\nindices=...)`.
"""

import operator

__all__ = ["median", "nanmedian", "mode", "cummax", "cummin", "linalg_lu", "linalg_lstsq", "linalg_ldl_factor",
           "linalg_ldl_factor_ex", "kthvalue", "aminmax", "frexp", "histogram", "lu_unpack", "triangular_solve"]


def _repr(self):
    fields = ",\n".join(f"{name}={value!r}" for name, value in zip(self.__match_args__, self))
    return f"kiln.return_types.{type(self).__name__}(\n{fields})"


def _reduce(self):
    return type(self), (tuple(self),)


def _named_result(name, fields):
    namespace = {
        "__slots__": (), "__module__": __name__, "__qualname__": name, "__repr__": _repr, "__reduce__": _reduce,
        "__match_args__": fields, "n_fields": len(fields), "n_sequence_fields": len(fields), "n_unnamed_fields": 0,
        "__doc__": f"The named results of kiln.{name}: {', '.join(fields)}.",
    }
    for i, field in enumerate(fields):
        namespace[field] = property(operator.itemgetter(i), doc=f"Alias for field number {i}")
    return type(name, (tuple,), namespace)


median = _named_result("median", ("values", "indices"))
nanmedian = _named_result("nanmedian", ("values", "indices"))
mode = _named_result("mode", ("values", "indices"))
cummax = _named_result("cummax", ("values", "indices"))
cummin = _named_result("cummin", ("values", "indices"))
linalg_lu = _named_result("linalg_lu", ("P", "L", "U"))
linalg_lstsq = _named_result("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
linalg_ldl_factor = _named_result("linalg_ldl_factor", ("LD", "pivots"))
linalg_ldl_factor_ex = _named_result("linalg_ldl_factor_ex", ("LD", "pivots", "info"))
kthvalue = _named_result("kthvalue", ("values", "indices"))
aminmax = _named_result("aminmax", ("min", "max"))
frexp = _named_result("frexp", ("mantissa", "exponent"))
histogram = _named_result("histogram", ("hist", "bin_edges"))
lu_unpack = _named_result("lu_unpack", ("P", "L", "U"))
triangular_solve = _named_result("triangular_solve", ("solution", "cloned_coefficient"))
