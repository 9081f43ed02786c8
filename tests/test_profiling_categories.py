"""Kernel categories on real kernel names from published GPU profiles and traces."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from nettebench.profiling.categories import CATEGORIES, OTHER, categorize

FIXTURE = Path(__file__).parent / "fixtures" / "kernel_names.csv"
NAMES = list(csv.DictReader(FIXTURE.open(encoding="utf-8")))


def test_fixture_covers_every_category_with_gpu_and_cpu_names():
    assert {row["category"] for row in NAMES} == set(CATEGORIES)
    gpu = [row for row in NAMES if not row["name"].startswith("aten::")]
    assert {row["category"] for row in gpu} == set(CATEGORIES)


@pytest.mark.parametrize("row", NAMES, ids=[row["name"][:60] for row in NAMES])
def test_real_kernel_names_fall_in_their_category(row):
    assert categorize(row["name"]) == row["category"], row["seen_in"]


def test_implicit_gemm_convolutions_are_not_gemm():
    # cuDNN's implicit-GEMM convolution kernels carry "gemm" in their names
    name = "sm80_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32"
    assert categorize(name) == "convolution"
    assert categorize("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn") == "GEMM"


def test_unknown_names_are_other():
    assert categorize("my_custom_kernel") == OTHER
    assert categorize("") == OTHER
