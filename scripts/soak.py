#!/usr/bin/python3
"""Soak test of supervised training: for MINUTES, run jobs under `pipetrain launch`
(worker threads, and 2- and 4-rank MPI jobs; schedules 1f1b and 1f1b-flush) while
faults are injected at random: SIGKILL of the training process or of one rank, and
SIGSTOP of one rank (its peers time out and abort the job). Every job must end with
bitwise the weights of the same run never interrupted.

Usage: scripts/soak.py MINUTES [BUILD_DIR]   (scripts/soak.sh wraps it)
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import onnx
from onnx import numpy_helper


def children(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def weights(path):
    return {t.name: numpy_helper.to_array(t).tobytes() for t in onnx.load(path).graph.initializer}


def main():
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 5
    build = sys.argv[2] if len(sys.argv) > 2 else "build"
    pipetrain = os.path.abspath(os.path.join(build, "cli", "pipetrain"))
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    rng = random.Random(int(os.environ.get("SOAK_SEED", "1")))
    tmp = tempfile.mkdtemp(prefix="pipetrain-soak-")
    mlp = os.path.join(tmp, "mlp.onnx")
    subprocess.run([pipetrain, "zoo", "export", "mlp", "-o", mlp], check=True, capture_output=True)
    plans = {}
    for ranks in (2, 4):
        plans[ranks] = os.path.join(tmp, f"plan{ranks}.json")
        subprocess.run([pipetrain, "partition", mlp, "--topology", str(ranks), "--bandwidth",
                        "10e9", "--batch", "32", "--straight", "-o", plans[ranks]], check=True,
                       capture_output=True)

    def train(run_dir, ranks, schedule, *extra):
        # A fixed plan: 1f1b's weights depend on where the stages are cut.
        args = [pipetrain, "train", mlp, "--data", "digits", "--batch", "32", "--loss",
                "cross-entropy", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9",
                "--seed", "3", "--quiet", "--plan", plans[ranks], "--schedule", schedule,
                "--epochs", "300", "--checkpoint-every", "40", "--peer-timeout", "2",
                "--run-dir", os.path.join(tmp, run_dir), *extra]
        if schedule == "1f1b-flush":
            args += ["--microbatches", "2"]
        return args

    references = {}
    stats = {"jobs": 0, "faults": 0, "restarts": 0, "differing": 0, "failed": 0}
    deadline = time.time() + 60 * minutes
    job = 0
    while time.time() < deadline:
        job += 1
        mode = rng.choice(["threads", "mpi2", "mpi4"] if mpiexec else ["threads"])
        ranks = 2 if mode != "mpi4" else 4
        schedule = rng.choice(["1f1b", "1f1b-flush"])
        key = (ranks, schedule)
        if key not in references:
            references[key] = os.path.join(tmp, f"ref-{ranks}-{schedule}.onnx")
            subprocess.run(train(f"ref-{ranks}-{schedule}", ranks, schedule, "-o",
                                 references[key]), check=True, capture_output=True)
        out = os.path.join(tmp, f"job{job}.onnx")
        run_dir = f"job{job}"
        command = train(run_dir, ranks, schedule, "-o", out)
        if mode != "threads":
            command = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", str(ranks),
                       *command, "--comm", "mpi"]
        # --hang-timeout: a rank stopped inside MPI_Init is beyond --peer-timeout.
        p = subprocess.Popen([pipetrain, "launch", "--max-restarts", "8", "--hang-timeout", "30",
                              "--", *command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        faults = []

        def inject():
            ck = os.path.join(tmp, run_dir, "checkpoint.onnx")
            for _ in range(rng.randint(1, 3)):
                time.sleep(rng.uniform(0.3, 1.5))
                if p.poll() is not None or not os.path.exists(ck):
                    continue
                top = children(p.pid)
                if not top:
                    continue
                victims = top if mode == "threads" else children(top[0])
                if not victims:
                    continue
                pid = rng.choice(victims)
                sig = signal.SIGKILL if mode == "threads" or rng.random() < 0.6 else signal.SIGSTOP
                try:
                    os.kill(pid, sig)
                    faults.append(sig.name)
                except ProcessLookupError:
                    pass
                time.sleep(3)  # let the restart begin before the next fault

        t = threading.Thread(target=inject, daemon=True)
        t.start()
        stdout, stderr = p.communicate(timeout=900)
        t.join()
        restarts = stderr.count("from the newest valid checkpoint")
        same = p.returncode == 0 and weights(out) == weights(references[key])
        stats["jobs"] += 1
        stats["faults"] += len(faults)
        stats["restarts"] += restarts
        stats["failed"] += p.returncode != 0
        stats["differing"] += p.returncode == 0 and not same
        print(f"job {job}: {mode} {schedule}: faults {','.join(faults) or 'none'}, "
              f"{restarts} restart(s), exit {p.returncode}, "
              f"{'bitwise equal' if same else 'DIFFERENT'}", flush=True)
        if p.returncode != 0:
            print(stderr[-2000:], flush=True)
    print(f"soak: {stats['jobs']} jobs in {minutes:g} min, {stats['faults']} faults injected, "
          f"{stats['restarts']} restarts, {stats['failed']} jobs failed, "
          f"{stats['differing']} with weights differing from the uninterrupted run")
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if stats["failed"] or stats["differing"] else 0


if __name__ == "__main__":
    sys.exit(main())
