"""kiln._functorch: AOTAutograd's Python surface (partitioners; aot_function and compile to come)."""
