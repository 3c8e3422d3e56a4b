#!/usr/bin/python3
"""Supervised training loses no work: a threads job (`train --max-restarts`) and a
2-rank MPI job (`launch -- mpirun ...`) whose processes are killed with SIGKILL
twice finish with bitwise the weights of an uninterrupted run, each restart
logged with its cause; bad input is not restarted; Ctrl-C to the supervisor
stops the job once, with a checkpoint, and is not restarted.

Usage: restart_test.py PATH/TO/pipetrain PATH/TO/mpiexec
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import onnx
from onnx import numpy_helper

PIPETRAIN = None
MPIEXEC = None


def children(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def wait_until(ready, seconds):
    deadline = time.time() + seconds
    while not ready() and time.time() < deadline:
        time.sleep(0.05)


def weights(path):
    return {t.name: numpy_helper.to_array(t).tobytes() for t in onnx.load(path).graph.initializer}


class Killer(threading.Thread):
    """SIGKILLs `kills` times a process found by `victim()` (None: not there yet), each
    once `ck` exists (so there is work to keep) and `delay` s have passed."""

    def __init__(self, victim, ck, kills, delay=0.4):
        super().__init__(daemon=True)
        self.victim, self.ck, self.kills, self.delay = victim, ck, kills, delay
        self.killed = []

    def run(self):
        deadline = time.time() + 120
        while len(self.killed) < self.kills and time.time() < deadline:
            pid = self.victim()
            if pid is None or pid in self.killed or not os.path.exists(self.ck):
                time.sleep(0.05)
                continue
            time.sleep(self.delay)
            try:
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
            except ProcessLookupError:
                pass


class RestartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.mlp = os.path.join(cls.dir, "mlp.onnx")
        subprocess.run([PIPETRAIN, "zoo", "export", "mlp", "-o", cls.mlp], check=True,
                       capture_output=True)
        # The reference: the same run, never interrupted (flush schedule: the weights do not
        # depend on where the stages are cut, so a restart may re-plan).
        cls.straight = os.path.join(cls.dir, "straight.onnx")
        r = subprocess.run(cls.train_args("straight", "-o", cls.straight), capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    @classmethod
    def train_args(cls, run_dir, *extra):
        return [PIPETRAIN, "train", cls.mlp, "--data", "digits", "--batch", "32", "--loss",
                "cross-entropy", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9",
                "--seed", "3", "--quiet", "--stages", "2", "--schedule", "1f1b-flush",
                "--microbatches", "2", "--epochs", "400", "--checkpoint-every", "50",
                "--run-dir", cls.path(run_dir), *map(str, extra)]

    def test_a_threads_job_killed_twice_ends_with_the_uninterrupted_weights(self):
        out = self.path("threads.onnx")
        p = subprocess.Popen(self.train_args("threads", "--max-restarts", 3, "-o", out),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The supervisor's child is the training process.
        killer = Killer(lambda: (children(p.pid) or [None])[0],
                        self.path("threads/checkpoint.onnx"), kills=2)
        killer.start()
        stdout, stderr = p.communicate(timeout=300)
        killer.join()
        self.assertEqual(p.returncode, 0, stdout + stderr)
        self.assertEqual(len(killer.killed), 2, "the job ended before both kills")
        self.assertEqual(stderr.count("killed by SIGKILL"), 2, stderr)
        self.assertIn("restart 2 of 3 from the newest valid checkpoint", stderr)
        self.assertIn("finished after 2 restarts", stderr)
        self.assertEqual(stdout.count("resuming from"), 2, stdout)
        self.assertEqual(weights(out), weights(self.straight))

    def test_an_mpi_job_whose_ranks_are_killed_ends_with_the_uninterrupted_weights(self):
        out = self.path("mpi.onnx")
        log = self.path("launch.log")
        cmd = [PIPETRAIN, "launch", "--max-restarts", "3", "--log", log, "--", MPIEXEC,
               "--oversubscribe", "--allow-run-as-root", "-np", "2",
               *self.train_args("mpi", "--comm", "mpi", "-o", out)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def a_rank():  # launch -> mpirun -> the ranks: the last one found (rank 1 mostly)
            for mpirun in children(p.pid):
                ranks = children(mpirun)
                if len(ranks) == 2:
                    return ranks[-1]
            return None

        killer = Killer(a_rank, self.path("mpi/checkpoint.onnx"), kills=2)
        killer.start()
        stdout, stderr = p.communicate(timeout=300)
        killer.join()
        self.assertEqual(p.returncode, 0, stdout + stderr)
        self.assertEqual(len(killer.killed), 2, "the job ended before both kills")
        self.assertIn("restart 2 of 3 from the newest valid checkpoint", stderr)
        with open(log) as f:
            logged = f.read()
        self.assertEqual(len(re.findall(r"restart \d of 3", logged)), 2, logged)
        self.assertEqual(weights(out), weights(self.straight))

    def test_a_stopped_threads_job_is_killed_by_the_watchdog_and_restarted(self):
        out = self.path("stopped.onnx")
        p = subprocess.Popen(self.train_args("stopped", "--max-restarts", 2, "--hang-timeout", 3,
                                             "-o", out),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ck = self.path("stopped/checkpoint.onnx")
        wait_until(lambda: os.path.exists(ck) and children(p.pid), 120)
        stopped = children(p.pid)[0]
        os.kill(stopped, signal.SIGSTOP)  # a hung process: alive, silent
        stdout, stderr = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, stdout + stderr)
        self.assertIn("no progress for 3 s (hung or stopped), killed", stderr)
        self.assertIn("restart 1 of 2", stderr)
        self.assertEqual(weights(out), weights(self.straight))

    def test_bad_input_is_not_restarted(self):
        r = subprocess.run(self.train_args("bad", "--max-restarts", 3, "--checkpoint",
                                           self.path("no/such/dir/ck.onnx")),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("not restarting", r.stderr)
        self.assertNotIn("restart 1", r.stderr)

    def test_ctrl_c_to_the_supervisor_stops_once_with_a_checkpoint(self):
        p = subprocess.Popen(self.train_args("stop", "--max-restarts", 3),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: os.path.exists(self.path("stop/checkpoint.onnx")), 60)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, stdout + stderr)
        self.assertIn("interrupted at step", stdout)
        self.assertIn("not restarting", stderr)
        self.assertNotIn("second signal", stderr)

    def test_ctrl_c_to_a_supervised_mpi_job_stops_every_rank_once(self):
        cmd = [PIPETRAIN, "launch", "--max-restarts", "3", "--", MPIEXEC, "--oversubscribe",
               "--allow-run-as-root", "-np", "2", *self.train_args("mpistop", "--comm", "mpi")]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: os.path.exists(self.path("mpistop/checkpoint.onnx")), 120)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 130, stdout + stderr)
        self.assertRegex(stdout, r"interrupted at step \d+ \(SIGUSR1\)")
        self.assertIn("not restarting", stderr)
        self.assertNotIn("second signal", stderr)


if __name__ == "__main__":
    PIPETRAIN, MPIEXEC = os.path.abspath(sys.argv[1]), sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
