"""unittest.main for the long CLI test scripts, split across ctest entries.

`--shard I/N` (anywhere in argv) runs the I-th of N shards: the module's tests
sorted by name, every N-th from the I-th. tests/CMakeLists.txt registers each
shard as a test of its own, so that ctest -j runs them side by side (under
ThreadSanitizer one pipelined script took 5.5 minutes on one core).
"""
import sys
import unittest


def main():
    shard, argv = None, []
    args = iter(sys.argv[1:])
    for a in args:
        if a == "--shard":
            shard = next(args)
        elif a.startswith("--shard="):
            shard = a.split("=", 1)[1]
        else:
            argv.append(a)
    if shard is None:
        unittest.main(argv=[sys.argv[0], *argv])
        return
    index, count = (int(x) for x in shard.split("/"))
    if not 0 <= index < count:
        sys.exit(f"--shard {shard}: expected I/N with 0 <= I < N")
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules["__main__"])

    def flatten(s):
        for t in s:
            yield from flatten(t) if isinstance(t, unittest.TestSuite) else [t]

    tests = sorted(flatten(suite), key=lambda t: t.id())
    mine = unittest.TestSuite(t for i, t in enumerate(tests) if i % count == index)
    print(f"shard {index}/{count}: {mine.countTestCases()} of {len(tests)} tests", flush=True)
    result = unittest.TextTestRunner(verbosity=2).run(mine)
    sys.exit(0 if result.wasSuccessful() else 1)
