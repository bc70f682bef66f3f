"""kiln.fx.passes.utils: helpers shared by passes (torch.fx.passes.utils)."""
