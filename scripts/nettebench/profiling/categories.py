"""Group GPU kernels (or, on a CPU, PyTorch operators) into a few categories a person reads.

A training step of a CNN launches hundreds of kernels whose names are C++ templates or cuDNN /
cuBLAS tile codes (``sm80_xmma_fprop_implicit_gemm_...``, ``volta_sgemm_128x64_nn``,
``void at::native::vectorized_elementwise_kernel<4, ...>``). What a reader wants to know is where
the time goes: convolutions, GEMMs, normalisation, elementwise work, copies, or other. The rules
below are an ordered table of regular expressions over the name, first match wins, so the order
carries meaning:

1. **copies** first: memory copies and sets (``Memcpy HtoD``, ``[CUDA memcpy ...]``,
   ``memset32``), layout transforms cuDNN inserts around convolutions (``nchwToNhwcKernel``,
   ``convertTensor_kernel``) and dtype casts (``bfloat16_copy_kernel_cuda``, ``aten::_to_copy``).
   Casts count as copies on purpose: in mixed precision they are the price of the cheaper maths.
2. **normalisation** (batch/layer/group norm, cuDNN's ``bn_fw_tr_...``) before anything that
   could also match its name.
3. pooling and losses go to **other** before the convolution rule sees cuDNN's pooling kernels.
4. **convolution**: cuDNN's convolution engines, including the implicit-GEMM ones
   (``sm80_xmma_fprop_implicit_gemm``, ``cutlass_cudnn_train::Kernel<...>``,
   ``implicit_convolve_sgemm``): their names contain "gemm", so this rule precedes GEMM.
5. **GEMM**: cuBLAS and CUTLASS matrix multiplies (``ampere_fp16_s16816gemm``, ``nvjet_hsh_...``,
   ``cutlass::Kernel2<...>``, split-K reductions), the fully connected layer.
6. **elementwise**: PyTorch's pointwise and reduction kernels (activations, adds, the optimiser's
   ``multi_tensor_apply``, softmax, sums).
7. everything else is **other**.

Known limit: the name decides. A GEMM kernel that cuDNN runs for a 1x1 convolution counts as
GEMM. ``tests/test_profiling_categories.py`` checks the table on real kernel names taken from
published GPU profiles (``tests/fixtures/kernel_names.csv``).

Standard library only.
"""

from __future__ import annotations

import re

CONVOLUTION = "convolution"
GEMM = "GEMM"
NORMALISATION = "normalisation"
ELEMENTWISE = "elementwise"
COPIES = "copies"
OTHER = "other"
CATEGORIES = (CONVOLUTION, GEMM, NORMALISATION, ELEMENTWISE, COPIES, OTHER)

_ELEMENTWISE_OPS = (
    "add|sub|mul|div|neg|abs|pow|sqrt|rsqrt|exp|log|relu|threshold|clamp|clamp_min|clamp_max"
    "|hardtanh|sigmoid|silu|gelu|mish|tanh|fill|zero|sum|mean|where|eq|ne|lt|le|gt|ge|maximum"
    "|minimum|addcmul|addcdiv|lerp|_foreach_\\w+|softmax|_softmax|log_softmax|_log_softmax"
    "|dropout|native_dropout|bernoulli"
)
_ELEMENTWISE_NODES = "Add|Sub|Mul|Div|Relu|Threshold|Mean|Sum|Softmax|LogSoftmax|Sigmoid|Silu|Gelu"

# (category, pattern): searched case-insensitively, first match wins.
RULES: tuple[tuple[str, str], ...] = (
    (
        COPIES,
        r"memcpy|memset|copy|nchwtonhwc|nhwctonchw|converttensor"
        r"|aten::(to|clone|contiguous|cat)\b",
    ),
    (
        NORMALISATION,
        r"batch_?norm|layer_?norm|group_?norm|instance_?norm|rms_?norm|\bbn_(fw|bw)|cudnn::bn_",
    ),
    (OTHER, r"pool|nll_loss|cross_entropy"),
    (
        CONVOLUTION,
        r"conv|fprop|dgrad|wgrad|winograd|fft\d*d?_|implicit_gemm|implicit_convolve|scudnn"
        r"|cudnn|image_first_layer",
    ),
    (
        GEMM,
        r"gemm|gemv|cublas|cutlass|nvjet|splitkreduce|xmma"
        r"|addmm|aten::(mm|bmm|baddbmm|matmul|linear|addmv)\b|\bmmbackward",
    ),
    (
        ELEMENTWISE,
        r"elementwise|reduce_kernel|multi_tensor_apply|softmax|foreach"
        rf"|aten::({_ELEMENTWISE_OPS})(_backward)?_?\b|\b({_ELEMENTWISE_NODES})Backward\d",
    ),
)
_COMPILED = tuple((category, re.compile(pattern, re.IGNORECASE)) for category, pattern in RULES)


def categorize(name: str) -> str:
    """The category of a kernel or operator name (one of :data:`CATEGORIES`)."""
    for category, pattern in _COMPILED:
        if pattern.search(name):
            return category
    return OTHER
