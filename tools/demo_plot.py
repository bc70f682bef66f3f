"""The demo's plot (tools/demo.py): training loss and test accuracy per epoch, each model a row,
eager against compiled (and CUDA) as lines, written as a PNG beside the demo's table.

matplotlib comes from requirements.txt; where it cannot be imported the plot is skipped with one
printed line, and the demo goes on. The figure is drawn on its own canvas (matplotlib.figure.Figure),
never through pyplot, so no window opens and no global backend is switched.
"""


def plot_training(histories, path):
    """Draws `histories` (dicts: model, label, mode, loss, accuracy; one value per epoch, accuracy
    in 0..1) into the PNG `path`; returns `path`, or None when matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as e:
        print(f"plot: skipped ({e}; `pip install matplotlib` draws it)")
        return None
    models = list(dict.fromkeys(h["model"] for h in histories))
    fig = Figure(figsize=(10, 3.4 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), 2, squeeze=False)
    for (loss_ax, acc_ax), model in zip(axes, models):
        for h in (h for h in histories if h["model"] == model):
            epochs = range(1, len(h["loss"]) + 1)
            style = dict(linestyle="-" if h["mode"] == "eager" else "--", marker="o", markersize=3, label=h["label"])
            loss_ax.plot(epochs, h["loss"], **style)
            acc_ax.plot(epochs, [a * 100 for a in h["accuracy"]], **style)
        loss_ax.set(title=f"{model}: training loss (mean over the epoch)", xlabel="epoch", ylabel="cross entropy",
                    yscale="log")
        acc_ax.set(title=f"{model}: test accuracy (360 samples)", xlabel="epoch", ylabel="%")
        for ax in (loss_ax, acc_ax):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
            ax.legend()
    fig.savefig(path, dpi=100)
    return path
