"""kiln._dynamo.config: knobs of bytecode capture, under torch._dynamo.config's names.

Set them as attributes (`kiln._dynamo.config.cache_size_limit = 16`); each is read at compile time.
"""

# Compiled entries kept per code object; past it the frame runs eagerly (with one warning).
cache_size_limit = 8
# Tensor.item() and friends become graph values (unbacked symbols) instead of graph breaks.
capture_scalar_outputs = False
# Ops whose output shape depends on data (nonzero, masked_select, x[mask]) stay in the graph with
# an unbacked size instead of being graph breaks (PyTorch's default: a break).
capture_dynamic_output_shape_ops = False
# A tensor dimension that changes between calls recompiles once with a symbolic size.
automatic_dynamic_shapes = True
# First compiles treat every size as static (sizes become dynamic only when they change).
assume_static_by_default = True
# Errors inside the compiler (not the user's own) fall back to eager with one warning (unless
# fullgraph=True). On by default, unlike PyTorch's flag: an internal error must never cost a user
# a program that runs eagerly (Note [Internal errors] in convert_frame.py).
suppress_errors = True
# Graphs with fewer call nodes than this are not handed to the backend (they run as written).
min_graph_ops = 1
