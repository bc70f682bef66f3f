"""kiln._inductor: lowering of AOTAutograd's aten graphs to fused loop kernels compiled by LLVM
(codegen/ in C++), and the "inductor" backend of kiln.compile. See codegen/README.md."""

from kiln._inductor import compile_fx  # noqa: F401  (registers the "inductor" backend)
from kiln._inductor import seeded_bugs

seeded_bugs.install()  # tests only: KILN_TEST_SEEDED_BUG (no effect without it)
