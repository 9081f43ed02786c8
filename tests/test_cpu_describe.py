"""The CPU described in every record (nettebench.records.cpu), and emulated precisions.

The decisive check runs torch itself under the documented way of making an AVX-512/AMX
machine behave like an AVX2-only one (ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2): the
record must then say AVX2 and no native bf16, whatever this machine's flags are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nettebench.records import cpu
from nettebench.vocabulary.precision import emulated_reason

CPUINFO = """processor\t: 0
model name\t: AMD EPYC 7B12
flags\t\t: fpu vme sse4_2 avx avx2 fma bmi2
processor\t: 1
flags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile
"""


def test_flags_are_the_speed_flags_of_the_first_cpu_in_a_fixed_order():
    assert cpu.cpu_flags(CPUINFO) == ["avx2"]
    spr = "flags : amx_tile avx512_fp16 amx_bf16 avx512_bf16 avx512f avx2 sse"
    assert cpu.cpu_flags(spr) == [
        "avx2",
        "avx512f",
        "avx512_bf16",
        "avx512_fp16",
        "amx_bf16",
        "amx_tile",
    ]
    assert cpu.cpu_flags("no flags here") == []


def test_cpu_lists_use_the_kernels_format():
    assert cpu.format_cpu_list([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert cpu.format_cpu_list({5}) == "5"
    assert cpu.format_cpu_list([]) == ""


def test_native_bf16_needs_the_flag_and_onednn():
    assert cpu.bf16_is_native(["avx2"], True) is False  # oneDNN would emulate with AVX2
    assert cpu.bf16_is_native(["avx2", "avx512_bf16"], True) is True
    assert cpu.bf16_is_native(["avx2", "amx_bf16"], False) is False  # capped by ONEDNN_MAX_CPU_ISA
    assert cpu.bf16_is_native(None, None) is None


def test_isa_caps_are_recorded_only_when_set():
    assert cpu.isa_limits({}) is None
    env = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert cpu.isa_limits(env) == "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"


def _describe(env: dict[str, str]) -> dict:
    code = "import json; from nettebench.records import cpu; print(json.dumps(cpu.describe()))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="needs Linux /proc")
def test_an_avx2_capped_torch_is_described_as_avx2_without_native_bf16():
    capped = {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OMP_WAIT_POLICY": "ACTIVE",
    }
    found = _describe(capped)
    assert found["cpu_capability"] == "AVX2"
    assert found["cpu_isa_limits"] == "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"
    assert found["onednn_bf16"] is False and found["bf16_native"] is False
    assert found["cpu_affinity_count"] == len(os.sched_getaffinity(0))
    assert found["omp_wait_policy"] == "ACTIVE"
    assert set(found) == set(cpu.CPU_KEYS)
    # the flags are the hardware's: the caps do not hide them
    assert found["cpu_flags"].split() == cpu.read_cpu_flags()


def test_an_unset_wait_policy_is_the_runtimes_default_not_unknown():
    assert cpu.omp_wait_policy({}) == "default"
    assert cpu.omp_wait_policy({"OMP_WAIT_POLICY": ""}) == "default"
    assert cpu.omp_wait_policy({"OMP_WAIT_POLICY": "PASSIVE"}) == "PASSIVE"


def test_the_environment_record_carries_the_cpu_keys():
    from nettebench.records import environment

    found = environment.collect()
    assert set(cpu.CPU_KEYS) <= set(found)
    assert found["cpu_capability"]


def test_bf16_on_a_cpu_without_native_bf16_is_emulated():
    assert "emulated" in emulated_reason("bf16", "cpu", bf16_native=False)
    assert emulated_reason("bf16", "cpu", bf16_native=True) is None
    assert emulated_reason("bf16", "cpu", bf16_native=None) is None  # an older record: unknown
    assert emulated_reason("bf16", "cuda", bf16_native=False) is None
    assert emulated_reason("O0", "cpu", bf16_native=False) is None
