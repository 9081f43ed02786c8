"""The latency-throughput figure of the inference cells: what a larger batch buys and costs.

One panel per device; one line per model and precision (and channels_last/compile variant)
through its batch sizes: x the median latency of one batch on the device, y the img/s at that
batch (both from the Offline device-batch phase), each point labelled with its batch size; the
pipeline's img/s at the same batches as a dashed line of the same colour, so the distance between
the two is what the input pipeline costs. Log-log, as a batch sweep spans orders of magnitude.
Drawn from ``inference.csv`` (:mod:`nettebench.report.inference_figure`, the command).
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import format as T
from nettebench.report.figures import plotting as P

POINT_LABELS = "number at a point: its batch size"  # the legend's title says what they are


def _label(row) -> str:
    extras = [k for k in ("channels_last", "compile") if T.as_bool(row.get(k))]
    return f"{row['model']} {row['precision']}" + (f" ({', '.join(extras)})" if extras else "")


def plot_inference(cells: pd.DataFrame):
    """The figure (an empty one that says so when no cell finished), drawn under the
    caller's style (the command's :func:`~nettebench.report.figures.plotting.style`)."""
    done = cells[cells["status"] == "ok"] if not cells.empty else cells
    if done.empty:
        return P.empty_figure("Inference", "No inference cell has finished.")
    devices = list(dict.fromkeys(done["device_name"]))
    fig, axes = P.new_figure(len(devices), panel_width=6.0, panel_height=4.2)
    colors = P.precision_colors(list(done["precision"].astype(str)))
    markers = "osD^v<>p*h"
    for ax, device in zip(axes, devices, strict=True):
        here = done[done["device_name"] == device].copy()
        here["label"] = here.apply(_label, axis=1)
        for index, (label, line) in enumerate(here.groupby("label", sort=False)):
            line = line.sort_values("batch_size")
            color = colors[str(line["precision"].iloc[0])]
            marker = markers[index % len(markers)]
            ax.plot(line["batch_ms"], line["offline_img_s"], marker=marker, color=color,
                    label=f"{label}: device batch")  # fmt: skip
            ax.plot(line["batch_ms"], line["pipeline_img_s"], marker=marker, color=color,
                    linestyle="--", fillstyle="none", alpha=0.8,
                    label=f"{label}: through the pipeline")  # fmt: skip
            for _, point in line.iterrows():
                ax.annotate(f"{int(point['batch_size'])}", (point["batch_ms"],
                            point["offline_img_s"]), textcoords="offset points",
                            xytext=(4, 4), fontsize=7)  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("latency of one batch on the device (ms, median)")
        ax.set_ylabel("images per second")
        ax.set_title(str(device))
        ax.legend(fontsize=7, loc="best", title=POINT_LABELS, title_fontsize=7)
    return fig
