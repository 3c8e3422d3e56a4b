#!/usr/bin/python3
"""`mpirun -np 4 pipetrain train ... --comm mpi` against the thread run of the
same plan: identical weights and optimizer state (straight and replicated
plans, async 1F1B, 1F1B-flush, 2BW, with and without pipeline-wide gradient
clipping); a rank that fails or is killed stops
the job within 10 seconds with one message naming the rank; a plan that needs
another rank count is refused.

Usage: mpi_train_test.py PATH/TO/pipetrain PATH/TO/mpiexec
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import onnx
from onnx import numpy_helper

PIPETRAIN = None
MPIEXEC = None


def run(*args, timeout=300):
    return subprocess.run([PIPETRAIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def mpirun(ranks, *args, timeout=300):
    return subprocess.run([MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", str(ranks),
                           PIPETRAIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


class MpiTrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.mlp = os.path.join(d, "mlp.onnx")
        cls.straight = os.path.join(d, "straight.json")
        cls.replicated = os.path.join(d, "replicated.json")
        for r in (run("zoo", "export", "mlp", "-o", cls.mlp),
                  run("partition", cls.mlp, "--topology", 4, "--bandwidth", 10e9, "--batch", 32,
                      "--straight", "-o", cls.straight)):
            assert r.returncode == 0, r.stdout + r.stderr
        # 2-1-1: the first two layers on two replicas (they allreduce), then one each.
        with open(cls.straight) as f:
            plan = json.load(f)
        s0, s1 = plan["stages"][0], plan["stages"][1]
        s0.update(last_layer=s1["last_layer"], last_layer_name=s1["last_layer_name"],
                  nodes=s0["nodes"] + s1["nodes"], replication=2, workers=[0, 1])
        plan["stages"] = [s0] + plan["stages"][2:]
        plan["config"] = "2-1-1"
        with open(cls.replicated, "w") as f:
            json.dump(plan, f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def args(self, run_dir, *extra, lr=0.05):
        return ["train", self.mlp, "--data", "digits", "--batch", 32, "--loss", "cross-entropy",
                "--optimizer", "sgd", "--lr", lr, "--momentum", 0.9, "--seed", 3, "--quiet",
                "--run-dir", self.path(run_dir), *extra]

    def assert_same(self, a, b):
        wa, wb = initializers(a), initializers(b)
        self.assertEqual(wa.keys(), wb.keys())
        for k in wa:
            self.assertTrue((wa[k] == wb[k]).all(), f"{k} differs between {a} and {b}")

    def test_mpi_ranks_train_exactly_as_threads(self):
        cases = [("straight-1f1b", self.straight, ["--schedule", "1f1b"]),
                 ("replicated-1f1b", self.replicated, ["--schedule", "1f1b"]),
                 ("replicated-flush", self.replicated, ["--schedule", "1f1b-flush",
                                                         "--microbatches", 2]),
                 ("straight-2bw", self.straight, ["--schedule", "2bw", "--microbatches", 4]),
                 # The global norm: one allreduce over all four ranks per update.
                 ("straight-1f1b-clip", self.straight, ["--schedule", "1f1b", "--clip-norm",
                                                        0.05]),
                 ("replicated-flush-clip", self.replicated, ["--schedule", "1f1b-flush",
                                                              "--microbatches", 2,
                                                              "--clip-norm", 0.05])]
        for name, plan, extra in cases:
            with self.subTest(name):
                common = ["--plan", plan, *extra, "--max-steps", 30, "--checkpoint-every", 30]
                t = run(*self.args(name + "-t", *common, "-o", self.path(name + "-t.onnx")))
                self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
                m = mpirun(4, *self.args(name + "-m", *common, "--comm", "mpi", "-o",
                                         self.path(name + "-m.onnx")))
                self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
                self.assertIn("one per MPI rank", m.stdout)
                self.assertEqual(m.stdout.count("trained model:"), 1)  # rank 0 reports alone
                self.assert_same(self.path(name + "-t.onnx"), self.path(name + "-m.onnx"))
                # Optimizer state too (momentum lives in the checkpoint).
                self.assert_same(self.path(name + "-t/checkpoint.onnx"),
                                 self.path(name + "-m/checkpoint.onnx"))

    @unittest.skipUnless(os.path.exists("/usr/share/games/fortunes/computers"),
                         "Debian's fortunes is not installed")
    def test_v_and_zero_bubble_schedules_train_on_ranks_exactly_as_threads(self):
        # Two chunks per rank (the V's), ZB-H2's deep stash, and --clip-norm's
        # post-validation, whose norm parts travel between ranks: threads' weights.
        for schedule, extra in (("zb-v", []), ("dualpipev", []), ("v-half", []),
                                ("zb-h2", ["--clip-norm", 0.05]), ("zb-v", ["--clip-norm", 0.05])):
            name = schedule + ("-clip" if extra else "")
            with self.subTest(name):
                common = ["--stages", 2, "--schedule", schedule, "--microbatches", 4,
                          "--max-steps", 20, *extra]
                t = run(*self.args(name + "-t", *common, "-o", self.path(name + "-t.onnx")))
                self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
                m = mpirun(2, *self.args(name + "-m", *common, "--comm", "mpi", "-o",
                                         self.path(name + "-m.onnx")))
                self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
                self.assertIn("one per MPI rank", m.stdout)
                self.assert_same(self.path(name + "-t.onnx"), self.path(name + "-m.onnx"))

    def test_tied_gpt_trains_on_ranks_exactly_as_threads(self):
        # GPT-2's LM head reads the token embedding: a copy on each rank, the
        # partial gradients summed between the two ranks before every update.
        gpt = self.path("gpt.onnx")
        self.assertEqual(run("zoo", "export", "gpt2", "--width-divisor", 16, "--layers", 2,
                             "--vocab", 256, "--seq-len", 16, "-o", gpt).returncode, 0)
        for schedule in (["1f1b"], ["1f1b-flush", "--microbatches", 2]):
            with self.subTest(schedule[0]):
                common = ["train", gpt, "--data", "text:/usr/share/games/fortunes/computers",
                          "--batch", 8, "--loss", "cross-entropy", "--optimizer", "adam",
                          "--max-steps", 12, "--quiet", "--schedule", *schedule]
                t = run(*common, "--stages", 2, "--run-dir", self.path("gpt-t"), "-o",
                        self.path("gpt-t.onnx"))
                self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
                m = mpirun(2, *common, "--plan", self.path("gpt-t/plan.json"), "--comm", "mpi",
                           "--run-dir", self.path("gpt-m"), "-o", self.path("gpt-m.onnx"))
                self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
                self.assert_same(self.path("gpt-t.onnx"), self.path("gpt-m.onnx"))

    def test_checkpoints_resume_across_ranks_as_threads_train(self):
        common = ["--plan", self.straight, "--schedule", "1f1b-flush", "--microbatches", 2]
        t = run(*self.args("whole", *common, "--max-steps", 40, "-o", self.path("whole.onnx")))
        self.assertEqual(t.returncode, 0, t.stderr)
        first = mpirun(4, *self.args("half", *common, "--max-steps", 20, "--checkpoint-every", 20),
                       "--comm", "mpi")
        self.assertEqual(first.returncode, 0, first.stderr)
        rest = mpirun(4, *self.args("rest", *common, "--max-steps", 40, "--resume",
                                    self.path("half/checkpoint.onnx"), "-o",
                                    self.path("resumed.onnx")), "--comm", "mpi")
        self.assertEqual(rest.returncode, 0, rest.stderr)
        self.assertIn("resuming from", rest.stdout)
        self.assert_same(self.path("whole.onnx"), self.path("resumed.onnx"))

    def test_sigusr1_to_mpirun_stops_at_a_round_with_a_checkpoint(self):
        # mpirun forwards SIGUSR1 to every rank (its Ctrl-C kills the job).
        job = self.start_long_job("usr1")
        try:
            job.send_signal(signal.SIGUSR1)
            out, _ = job.communicate(timeout=30)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
        self.assertEqual(job.returncode, 130, out)
        self.assertRegex(out, r"interrupted at step \d+ \(SIGUSR1\): checkpoint .*usr1/checkpoint.onnx")
        self.assertTrue(os.path.exists(self.path("usr1/checkpoint.onnx")))

    def test_a_failing_rank_stops_every_rank_naming_it(self):
        start = time.monotonic()
        r = mpirun(4, *self.args("nan", "--plan", self.straight, "--max-steps", 30, lr=1e12),
                   "--comm", "mpi", timeout=60)
        self.assertLess(time.monotonic() - start, 10)
        self.assertNotEqual(r.returncode, 0)
        errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertRegex(errors[0], r"communicator aborted by rank 3: worker 3 \(stage 3\): "
                                    r"step \d+, microbatch \d+: the loss is (NaN|Inf)")

    def test_a_killed_rank_ends_the_job_within_10_seconds_naming_it(self):
        job = self.start_long_job("killed")
        try:
            victim = self.rank_pid(job.pid, 2)
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            out, _ = job.communicate(timeout=30)
            self.assertLess(time.monotonic() - killed, 10, out)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
        self.assertNotEqual(job.returncode, 0)
        self.assertRegex(out, r"rank 2 .*(signal 9|Killed)")

    def test_a_stopped_rank_ends_the_job_within_10_seconds_naming_it(self):
        # mpirun sees nothing wrong with a stopped (or hung) process: the heartbeats do.
        for victim_rank in (2, 0):  # 0: another rank speaks for the job
            with self.subTest(stopped=victim_rank):
                job = self.start_long_job(f"stopped{victim_rank}")
                victim = self.rank_pid(job.pid, victim_rank)
                try:
                    os.kill(victim, signal.SIGSTOP)
                    stopped = time.monotonic()
                    out, _ = job.communicate(timeout=30)
                    self.assertLess(time.monotonic() - stopped, 10, out)
                finally:
                    for pid in (victim, job.pid):
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    job.wait()
                self.assertNotEqual(job.returncode, 0)
                lines = [l for l in out.splitlines() if "has not been heard from" in l]
                self.assertEqual(len(lines), 1, out)
                self.assertRegex(lines[0], rf"^error: .*rank {victim_rank} has not been heard "
                                           r"from for 5\.0 s")

    def start_long_job(self, run_dir):
        """A 4-rank run of 100000 epochs, returned once its first step is logged."""
        job = subprocess.Popen(
            [MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", "4", PIPETRAIN,
             *map(str, self.args(run_dir, "--plan", self.straight, "--epochs", 100000,
                                 "--comm", "mpi"))],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        metrics = self.path(run_dir + "/metrics.jsonl")
        deadline = time.monotonic() + 60
        while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
            if time.monotonic() > deadline or job.poll() is not None:
                job.kill()
                job.wait()
                self.fail("training never started (or the job ended early)")
            time.sleep(0.1)
        return job

    @staticmethod
    def rank_pid(launcher, rank):
        """The pid of MPI rank `rank` among the launcher's descendants."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if (f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and PIPETRAIN.encode() in cmd
                    and int(pid) != launcher):
                return int(pid)
        raise AssertionError(f"no process of rank {rank}")

    def test_ranks_plan_with_the_links_they_measure(self):
        r = mpirun(2, *self.args("links", "--stages", 2, "--max-steps", 3), "--comm", "mpi",
                   timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = re.search(r"links between the ranks, measured: 2 @ ([\d.e+]+) GB/s \+ ([\d.e+]+) us "
                      r"per message", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        with open(self.path("links/plan.json")) as f:
            level, = json.load(f)["topology"]["levels"]
        self.assertEqual(level["count"], 2)
        # The plan (so the DP and the simulator) carries what was printed.
        self.assertAlmostEqual(level["bandwidth"] / 1e9, float(m.group(1)), delta=0.01 * float(m.group(1)))
        self.assertAlmostEqual(level["latency_s"] * 1e6, float(m.group(2)), delta=0.01 * float(m.group(2)))
        self.assertGreater(level["latency_s"], 0)
        # The thread run keeps the in-memory assumption (no latency).
        r = run(*self.args("links_threads", "--stages", 2, "--max-steps", 3))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("links between the ranks", r.stdout)
        with open(self.path("links_threads/plan.json")) as f:
            self.assertNotIn("latency_s", json.load(f)["topology"]["levels"][0])

    def test_a_plan_for_other_rank_counts_is_refused(self):
        r = mpirun(3, *self.args("count", "--plan", self.straight, "--max-steps", 5),
                   "--comm", "mpi", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        self.assertEqual(errors, ["error: the plan runs 4 workers but the MPI job has 3 ranks "
                                  "(start it with mpirun -np 4)"], r.stderr)

    def test_nccl_needs_the_cuda_backend_and_a_gpu(self):
        r = mpirun(2, *self.args("nccl", "--stages", 2, "--max-steps", 5), "--comm", "nccl",
                   timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("error: --comm nccl moves tensors between GPUs: add --backend cuda", r.stderr)
        if os.path.exists("/dev/nvidia0"):
            return
        r = mpirun(2, *self.args("nccl", "--stages", 2, "--max-steps", 5), "--comm", "nccl",
                   "--backend", "cuda", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, r"error: (--comm nccl needs a CUDA device, and none is present|"
                                   r"pipetrain was built without CUDA)")

    def test_ranks_without_comm_mpi_are_refused(self):
        r = mpirun(2, *self.args("nocomm", "--stages", 2, "--max-steps", 5), timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("mpirun started 2 ranks of pipetrain: add --comm mpi", r.stderr)


if __name__ == "__main__":
    PIPETRAIN, MPIEXEC = os.path.abspath(sys.argv[1]), sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
