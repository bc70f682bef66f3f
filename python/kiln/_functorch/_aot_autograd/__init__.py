"""AOTAutograd's parts; kiln._functorch.aot_autograd is the entry point and says what each does."""
