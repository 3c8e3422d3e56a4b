"""OpenBLAS's kernel set for the side-by-side benchmarks.

Debian's OpenBLAS 0.3.21 chooses kernels by CPU model and falls back to its
SSE3 "Prescott" kernels on models it does not know; pipetrain then runs its
GEMMs on oneDNN's sgemm (executor/cpu/kernels/blas_core.h), but PyTorch, which
links the same OpenBLAS, would be left on the fallback. So each benchmark gives
both the kernels the CPU's flags call for: OPENBLAS_CORETYPE, set before torch
is imported (and inherited by pipetrain, which then uses OpenBLAS with it).
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


def torch_openmp_blas(env):
    """`env` with Debian's OpenMP build of OpenBLAS preloaded under PyTorch, where it is installed.

    Debian's PyTorch links libblas.so.3, which Debian's alternatives point at the
    pthread build of OpenBLAS. With 2 threads its pool and PyTorch's OpenMP team
    then share the cores: OpenMP's threads spin after each parallel region (a
    bias copy, a GELU) while OpenBLAS's wait for them, and nn.Linear ran slower
    on 2 threads than on 1 (5.7 vs 4.2 ms). pipetrain links the OpenMP build,
    one pool for both; PyTorch gets the same here, so the comparison is with
    PyTorch at its best on this machine.
    """
    arch = os.popen("gcc -dumpmachine 2>/dev/null").read().strip() or "x86_64-linux-gnu"
    lib_dir = f"/usr/lib/{arch}/openblas-openmp"
    libs = [os.path.join(lib_dir, n) for n in ("libblas.so.3", "libopenblas.so.0")]
    if not all(os.path.exists(p) for p in libs):
        return env
    preload = " ".join(libs + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
    return dict(env, LD_PRELOAD=preload)


def blas_of_torch(env):
    """Which OpenBLAS build PyTorch runs on under `env`, for the printout."""
    return "OpenMP" if "openblas-openmp" in env.get("LD_PRELOAD", "") else "Debian's default (pthread)"
