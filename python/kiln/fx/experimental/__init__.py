"""kiln.fx.experimental: make_fx (proxy_tensor) and symbolic shapes, as torch.fx.experimental."""
