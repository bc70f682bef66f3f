"""kiln.onnx: PyTorch's ONNX export names, for programs that export a model at the end of training.
kiln cannot write ONNX: export() and dynamo_export() raise NotImplementedError saying how to export
a kiln-trained model (its state_dict loads into the same model built with torch), and
is_in_onnx_export() is False, so models that branch on it run their training path."""

_HOW = ("kiln cannot export ONNX. Save the weights with kiln.save(model.state_dict(), path), load them into "
        "the same model built with PyTorch (model.load_state_dict(torch.load(path))), and call "
        "torch.onnx.export there.")


def export(model, args=(), f=None, *more, **kwargs):
    """Raises NotImplementedError: see the module docstring for the way to export."""
    raise NotImplementedError(f"kiln.onnx.export: {_HOW}")


def dynamo_export(model, *args, **kwargs):
    """Raises NotImplementedError: see the module docstring for the way to export."""
    raise NotImplementedError(f"kiln.onnx.dynamo_export: {_HOW}")


def is_in_onnx_export():
    """False: kiln never runs a model for ONNX export."""
    return False


class ExportOptions:
    """Accepted for PyTorch's signatures; kiln.onnx.dynamo_export refuses every export."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
