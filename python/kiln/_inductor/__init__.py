"""kiln._inductor: lowering of AOTAutograd's aten graphs to fused loop kernels compiled by LLVM
(codegen/ in C++), behind kiln.compile's "inductor" backend (kiln._dynamo.backends.inductor,
which imports this package at the first compile). See README.md here and codegen/README.md."""

from kiln._inductor import seeded_bugs

seeded_bugs.install()  # tests only: KILN_TEST_SEEDED_BUG (no effect without it)
