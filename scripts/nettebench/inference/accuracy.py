"""What a precision costs in accuracy: a trained cell's final weights, evaluated per variant.

The study's own models answer it: a finished matrix cell keeps its final weights (``weights.pt``,
written by the trainer when the config's ``inference.accuracy`` is on) and this module evaluates
them on the full validation split, as the trainer validates (the reference's resize and centre
crop), once per variant (precision, channels_last, compile) of the inference cells of the same
model and dataset. fp32 comes first: every other variant is reported as its difference from it
(percentage points of top-1 and top-5) and as the share of images whose top-1 class changed.
Both read one ranking (:func:`nettebench.training.loop.predicted_classes`: equal logits go to the
lower class index), so a variant whose every prediction is fp32's has fp32's top-1 exactly.
"""

from __future__ import annotations

from typing import Any

import torch

from nettebench.inference.model import InferenceModel
from nettebench.training.loop import pad_batch, predicted_classes, topk_correct
from nettebench.vocabulary import precision


def load_weights(path) -> dict[str, Any]:
    """A matrix cell's weights.pt (nettebench.training.checkpoint.save_weights): its cell_id
    and fp32 ``state_dict``, or ``state_dict`` None where the cell did not finish (oom, ...)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def evaluate_variants(
    state_dict,
    model_name: str,
    num_classes: int,
    loader,
    device: torch.device,
    variants: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """One row per variant: top-1/top-5 (%) and, after the first (fp32), their differences."""
    rows: list[dict[str, Any]] = []
    reference: torch.Tensor | None = None
    for variant in variants:
        row: dict[str, Any] = {**variant, "status": "ok", "message": None}
        reason = precision.unsupported_reason(variant["precision"], device.type)
        if reason:
            row.update(status="unsupported", message=reason)
            rows.append(row)
            continue
        model = InferenceModel(
            model_name,
            num_classes,
            variant["precision"],
            device,
            channels_last=variant["channels_last"],
            compile=variant["compile"],
            state_dict=state_dict,
        )
        top1, top5, predicted = _evaluate(model, loader, pad=variant["compile"])
        row.update(top1=top1, top5=top5, images=int(predicted.numel()))
        if reference is None:
            reference = predicted
            base = row
        else:
            row.update(
                top1_diff=top1 - base["top1"],
                top5_diff=top5 - base["top5"],
                changed_share=float((predicted != reference).float().mean()),
            )
        rows.append(row)
    return rows


def _evaluate(model: InferenceModel, loader, *, pad: bool) -> tuple[float, float, torch.Tensor]:
    """Top-1 and top-5 (%) over the split, and every image's top-1 class (on the host)."""
    correct = torch.zeros(2)
    predicted = []
    samples = 0
    size = None
    for images, targets in loader:
        real = targets.shape[0]
        size = size or real
        if pad and real < size:  # one shape for a compiled model (no second graph)
            images, targets = pad_batch(images, targets, size)
        logits = model(model.prepare(images)).float().cpu()
        correct += topk_correct(logits, targets, ks=(1, 5))
        predicted.append(predicted_classes(logits[:real])[:, 0])
        samples += real
    top1, top5 = (correct * 100.0 / max(samples, 1)).tolist()
    return top1, top5, torch.cat(predicted) if predicted else torch.empty(0)
