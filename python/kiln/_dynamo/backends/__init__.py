"""kiln._dynamo.backends: compilers for captured graphs (registry.py)."""
