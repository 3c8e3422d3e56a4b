"""OpenBLAS's kernel set for the side-by-side benchmarks.

Debian's OpenBLAS 0.3.21 chooses kernels by CPU model and falls back to its
SSE3 "Prescott" kernels on models it does not know; pipetrain then chooses by
the CPU's flags (executor/cpu/kernels/blas_core.h). PyTorch here links the same
OpenBLAS, so each benchmark gives it the same kernels: OPENBLAS_CORETYPE, set
before torch is imported (and inherited by pipetrain, which then keeps it).
"""
import os


def same_blas_as_pipetrain():
    """Sets OPENBLAS_CORETYPE from /proc/cpuinfo's flags unless it is set; returns it."""
    if "OPENBLAS_CORETYPE" not in os.environ:
        flags = set()
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
        if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
            os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
        elif {"avx2", "fma"} <= flags:
            os.environ["OPENBLAS_CORETYPE"] = "Haswell"
        elif "avx" in flags:
            os.environ["OPENBLAS_CORETYPE"] = "Sandybridge"
    return os.environ.get("OPENBLAS_CORETYPE", "OpenBLAS's own choice")


def cpu_line():
    """The CPU's model name and the vector flags that decide the kernels, for the printout."""
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    shown = [x for x in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if x in flags]
    return (f"{model}, {os.cpu_count()} cores, flags: {' '.join(shown) or 'none of avx2/avx512/amx'}; "
            f"OpenBLAS kernels for PyTorch and pipetrain: {os.environ.get('OPENBLAS_CORETYPE', 'their own choice')}")
