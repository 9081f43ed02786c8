"""torchvision imported without torch._dynamo (models/torchvision_import.py), each case in a fresh
Python, since what is under test is what a fresh job process imports."""

from __future__ import annotations

from tests.fresh_python import run_fresh


def test_a_job_imports_torchvision_without_dynamo_and_dynamo_still_answers_when_asked():
    """One fresh process, in the order a job meets them: every module that uses torchvision
    (the trainer's, the profiler's, the inference command's, the loaders) imported, torchvision's
    ops registered, dynamo not loaded and the stand-in gone from sys.modules. Then a stand-in
    answers ``inspect.getmodule``'s ``__file__`` question without importing anything and hands
    any other name (what a torchvision build might import besides) to the real module; roi_align's
    ``is_compile_supported`` is the lazy one and answers what torch's own answers; roi_align
    itself (the cached loader's crops) and a compiled function work."""
    out = run_fresh(
        """
        import sys
        import nettebench.benchmarks.cell_job, nettebench.training.cli, nettebench.profiling.cli
        import nettebench.inference.cli, nettebench.models.build, nettebench.data.cached
        import nettebench.data.augment, nettebench.records.environment
        import torch
        from nettebench.models import torchvision_import as ti
        print(hasattr(torch.ops.torchvision, "roi_align"), "torch._dynamo" in sys.modules,
              ti.DYNAMO_UTILS in sys.modules)
        stand_in = ti._stand_in()
        sys.modules[ti.DYNAMO_UTILS] = stand_in
        dunder, quiet = hasattr(stand_in, "__file__"), "torch._dynamo" not in sys.modules
        counters = stand_in.counters
        import torch._dynamo.utils as real
        print(dunder, quiet, counters is real.counters, sys.modules[ti.DYNAMO_UTILS] is real)
        roi = sys.modules["torchvision.ops.roi_align"]
        print(roi.is_compile_supported is ti.is_compile_supported,
              roi.is_compile_supported("cpu") == real.is_compile_supported("cpu"))
        boxes = torch.tensor([[0, 0.0, 0.0, 3.0, 3.0]])
        out = ti.torchvision.ops.roi_align(torch.ones(1, 1, 4, 4), boxes, output_size=2)
        double = torch.compile(lambda x: x * 2, backend="eager")
        print(out.shape == (1, 1, 2, 2), bool((out == 1).all()), double(torch.ones(2)).tolist())
        """
    )
    assert out.splitlines() == [
        "True False False", "False True True True", "True True", "True True [2.0, 2.0]",
    ]  # fmt: skip


def test_where_dynamo_is_loaded_already_torchvision_is_imported_as_usual():
    out = run_fresh(
        """
        import sys
        import torch._dynamo.utils as real
        from nettebench.models import torchvision_import
        roi = sys.modules["torchvision.ops.roi_align"]
        print(roi.is_compile_supported is real.is_compile_supported)
        """
    )
    assert out == "True"
