"""What the operator sweep compares and how strictly: the tolerances, the random operators, the
classes a result can have and the named subsets of operators."""

# Tolerances per dtype, as torch.testing.assert_close applies them: |xhal - cpu| <= atol +
# rtol * |cpu|. test_compare_cpu in PyTorch's test/test_ops.py holds CUDA to the CPU with
# atol = rtol = 1e-3 for every dtype; float16 keeps that (about one rounding step of its
# 10-bit mantissa). bfloat16's step is 2^-8 = 3.9e-3, so 1e-3 would fail any single rounding
# that happens elsewhere (a composite operator rounds after each step, a fused CPU kernel only
# at the end); it gets torch's own default rtol for bfloat16, 1.6e-2 (two to four steps).
# float32 and float64 are held much closer: 1e-5 allows a different summation order over a
# few thousand elements (torch's own default for float32 is rtol 1.3e-6, atol 1e-5), and 1e-7
# does the same for float64. Integers and booleans must be equal. No operator has a tolerance
# of its own.
#
# A float16, bfloat16, float32 or complex64 value beyond its tolerance is not yet a mismatch:
# the CPU's answer is not the true one either. xhal computes float16 and bfloat16 in float32 and
# rounds once where a CPU composite rounds after each step, and in an ill-conditioned float32
# operator (a sum that cancels, a backward through large exponents) both sides err by more
# than the tolerance. Such a sample is run once more on the CPU in float64 (its floating tensors
# and dtype arguments widened, the gradients against the same cotangents), and the difference
# counts only where xhal's value is farther from that reference than twice the CPU's largest
# distance on the same tensor and two rounding steps of the dtype: |xhal - ref| >
# 2 max|cpu - ref| + 2u|ref| + tiny, u the unit roundoff and tiny the smallest normal
# (torch_ops/judge.py, CPU_FACTOR and ROUNDINGS). A NaN or infinite reference
# must be matched exactly; where only the CPU's value is NaN or infinite, xhal's must be within
# the tolerance of the reference. float64 and complex128 values are judged by their tolerance
# alone: a float64 reference would be the CPU's own run again.
TOLERANCES = {
    "default": {"atol": 1e-5, "rtol": 1e-5},
    "float16": {"atol": 1e-3, "rtol": 1e-3},
    "bfloat16": {"atol": 1e-3, "rtol": 1.6e-2},
    "float32": {"atol": 1e-5, "rtol": 1e-5},
    "float64": {"atol": 1e-7, "rtol": 1e-7},
    "complex64": {"atol": 1e-5, "rtol": 1e-5},
    "complex128": {"atol": 1e-7, "rtol": 1e-7},
}

# Operators whose output is random (globs over "name" or "name.variant"): only the structure,
# shapes and dtypes of their results are compared. OpInfos marked has_nondeterministic_output
# (the empty* factories, whose memory is uninitialised) count as random too.
RANDOM_OPS = [
    "bernoulli",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "multinomial",
    "normal",
    "normal.*",
    "uniform",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "nn.functional.rrelu",
    # Its samples apply dropout (dropout_p=0.5 in training), drawn from xhal's own generator.
    "nn.functional.multi_head_attention_forward",
    "pca_lowrank",
    "svd_lowrank",
]

# Cases not run at all, because torch's own CPU kernel is unreliable on OpInfo's samples, without
# xhal in the process: grid_sample in half precision reads memory it does not own, so the same
# forward on the same input gives a different count of NaNs from call to call, and its backward
# corrupts the heap (free(): invalid next size, double free or corruption). xhal has no
# grid_sample kernel and falls back to that same CPU kernel, so no comparison can be trusted, and
# a worker could die at random or go on with a damaged heap that fails later cases. Each such
# case is classed cpu-error with the reason, and the summary lists them.
CPU_UNRELIABLE = {
    "nn.functional.grid_sample": {
        "dtypes": ["float16", "bfloat16"],
        "reason": "not run: torch's CPU grid_sampler_2d is unreliable in half precision, without xhal in "
                  "the process (the same forward gives a different count of NaNs from call to call; the "
                  "backward corrupts the heap)",
    },
}

# The classes of an (op, dtype), in the order the reports list them.
CLASSES = [
    "native",      # every sample matched and nothing fell back
    "fallback",    # every sample matched, but some aten operator ran on the CPU
    "random",      # a random operator: structure, shapes and dtypes matched
    "mismatch",    # a shape, dtype or value differs (a floating value is farther from the
                   # float64 reference than the CPU's), or the CPU raised and xhal did not
    "error",       # xhal raised where the CPU did not, or raised another exception type
    "crash",       # the worker process died
    "timeout",     # the worker took longer than --timeout
    "cpu-error",   # the CPU raised on every sample, or crashed in its own run: nothing compared
    "no-samples",  # the OpInfo gave no sample for the dtype
    "unsupported", # the OpInfo does not claim the dtype on the CPU: not run
]
FAILURES = ["mismatch", "error", "crash", "timeout"]
# The classes of the cases that ran on xhal, the denominator of the native share.
COMPARED = ["native", "fallback", "random", "mismatch", "error", "crash", "timeout"]

# Named lists of operators ("name" or "name.variant") for quick runs: `ci` is a representative
# few dozen for CI on slow backends (elementwise, reductions, matrix products, norms,
# indexing, views, copies).
SUBSETS = {
    "ci": [
        # elementwise
        "abs", "add", "sub", "mul", "div.no_rounding_mode", "neg", "exp", "log", "sqrt", "rsqrt",
        "sin", "tanh", "sigmoid", "pow", "clamp", "where", "maximum", "eq", "lt",
        "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
        # reductions
        "sum", "mean", "amax", "argmax", "prod", "var", "cumsum", "softmax", "log_softmax",
        # matrix products and convolution
        "mm", "bmm", "matmul", "addmm", "nn.functional.linear", "nn.functional.conv2d",
        # norms and losses
        "nn.functional.layer_norm", "nn.functional.rms_norm", "nn.functional.group_norm",
        "nn.functional.batch_norm", "nn.functional.cross_entropy",
        # indexing
        "index_select", "gather", "scatter_add", "index_put", "masked_fill",
        "nn.functional.embedding", "topk", "sort",
        # views, copies and factories
        "view", "reshape", "permute", "transpose", "expand", "narrow", "select", "cat", "stack",
        "flip", "clone", "to", "contiguous", "zeros_like", "full", "arange",
    ],
}

DTYPES = [
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128",
    "int8", "uint8", "int16", "int32", "int64", "bool",
]
