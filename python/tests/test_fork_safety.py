"""Forking from Python is safe: workers never run Python (no second run of atexit handlers, of
threads, of buffered output), the group closes at interpreter exit, Ctrl-C (SIGINT to the whole
process group, as a terminal sends it) interrupts the program on the master and leaves the group
usable, a killed master takes its workers along, and no run leaves anything in /dev/shm. Each
scenario runs as its own Python process; the test inspects what it left behind.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np

import synk

PRELUDE = """
import os, sys, threading, time
import numpy as np
import synk
def segment_prefix(d):          # synk-<session>- : every segment of this process starts with it
    return "-".join(d._segment_name.split("-")[:2]) + "-"
"""


def run_script(body, *args, timeout=60, **popen):
    script = PRELUDE + textwrap.dedent(body)
    p = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, **popen)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def value_of(out, key):
    for line in out.splitlines():
        if line.startswith(key + " "):
            return line.split()[1:]
    raise AssertionError(f"no '{key}' line in:\n{out}")


def assert_nothing_left(prefix, worker_pids, wait_s=5.0):
    deadline = time.time() + wait_s
    while True:
        left = [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
        alive = [p for p in worker_pids if os.path.exists(f"/proc/{p}") and not _zombie(p)]
        if not left and not alive:
            return
        if time.time() > deadline:
            raise AssertionError(f"left behind: segments {left}, worker processes {alive}")
        time.sleep(0.05)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_workers_never_run_python(tmp_path):
    marks = tmp_path / "marks.txt"
    code, out, err = run_script("""
        out = sys.argv[1]
        def mark(what):
            with open(out, "a") as f:
                f.write(f"{what} {os.getpid()}\\n")
        import atexit
        atexit.register(mark, "atexit")
        stop = threading.Event()
        def ticker():
            while not stop.is_set():
                mark("thread")
                time.sleep(0.001)
        threading.Thread(target=ticker, daemon=True).start()
        print("buffered before the fork")          # still in Python's buffer: must be written once
        synk.fork(2)
        f = synk.compile("fn f(scatter x: f32[n, 3]) { out s: sum = sum(x); }").function("f")
        x = synk.data(np.ones((10, 3), "float32"))
        for _ in range(300):
            assert f(x) == 30
        time.sleep(0.05)
        stop.set()
        print("PREFIX", segment_prefix(x))
        print("WORKERS", synk.worker_pid(1))
        print("MASTER", os.getpid())
        # no synk.close(): the interpreter's exit closes the group
    """, marks)
    assert code == 0, err
    assert out.count("buffered before the fork") == 1
    master = value_of(out, "MASTER")[0]
    lines = marks.read_text().split("\n")[:-1]
    assert lines.count(f"atexit {master}") == 1 and sum(ln.startswith("atexit") for ln in lines) == 1
    assert {ln.split()[1] for ln in lines} == {master}, "a worker ran a Python thread or atexit handler"
    assert_nothing_left(value_of(out, "PREFIX")[0], [int(p) for p in value_of(out, "WORKERS")])


def test_uncaught_exception_still_cleans_up():
    code, out, err = run_script("""
        synk.fork(2)
        x = synk.data(np.ones(4))
        print("PREFIX", segment_prefix(x))
        print("WORKERS", synk.worker_pid(1))
        sys.stdout.flush()
        raise RuntimeError("the user's program failed")
    """)
    assert code == 1 and "the user's program failed" in err
    assert_nothing_left(value_of(out, "PREFIX")[0], [int(p) for p in value_of(out, "WORKERS")])


def test_ctrl_c_interrupts_the_program_not_the_group():
    # SIGINT goes to the whole process group (a terminal's Ctrl-C): workers ignore it; the master
    # raises KeyboardInterrupt when the call in progress returns; the group stays usable.
    code, out, err = run_script("""
        synk.fork(2)
        f = synk.compile('''
        fn f(scatter x: f32[n, 256], bcast w: f32[256, 256]) { out s: sum = sum(relu(x @ w)); }
        ''').function("f")
        x = synk.data(np.random.default_rng(1).standard_normal((4000, 256)).astype("float32"))
        w = synk.data(np.eye(256, dtype="float32"))
        def interrupt():
            time.sleep(0.5)
            os.killpg(os.getpgrp(), 2)
        threading.Thread(target=interrupt).start()
        calls = 0
        try:
            while True:
                f(x, w)
                calls += 1
        except KeyboardInterrupt:
            print("INTERRUPTED", calls)
        os.kill(synk.worker_pid(1), 0)                  # the worker lives
        print("SUM", float(f(x, w)), float(np.maximum(x.data, 0).sum()))
        print("PREFIX", segment_prefix(x))
        print("WORKERS", synk.worker_pid(1))
        synk.close()
    """, start_new_session=True)
    assert code == 0, err
    assert int(value_of(out, "INTERRUPTED")[0]) > 0
    got, want = map(float, value_of(out, "SUM"))
    assert abs(got - want) <= 1e-4 * abs(want)
    assert_nothing_left(value_of(out, "PREFIX")[0], [int(p) for p in value_of(out, "WORKERS")])


def test_killed_master_takes_its_workers_along():
    p = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        synk.fork(3)
        x = synk.data(np.ones(4))
        print("PREFIX", segment_prefix(x))
        print("WORKERS", synk.worker_pid(1), synk.worker_pid(2), flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    prefix = value_of(p.stdout.readline(), "PREFIX")[0]
    workers = [int(w) for w in value_of(p.stdout.readline(), "WORKERS")]
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    assert_nothing_left(prefix, workers)


def test_views_outlive_reallocation(group):
    d = synk.data(np.arange(10, dtype=np.float32))
    v = d.data
    d.set_value(np.ones(100000, dtype=np.float32))        # re-allocates: v keeps the old memory
    assert v.sum() == 45 and d.data.sum() == 100000
    d.free_memory()
    v2 = np.asarray(d)
    del d
    assert v.sum() == 45 and v2.size == 0
    e = synk.data(np.zeros((4, 2), dtype=np.int64))
    view = e.data
    view[1] = 7                                            # writes go to the shared memory
    assert e[1].tolist() == [7, 7] and np.shares_memory(view, e.data)
    e.set_length(2)
    assert e.data.shape == (2, 2) and e.data[1].tolist() == [7, 7]
    # What is written through a view is what every rank reads.
    f = synk.compile("fn f(scatter x: i64[n]) { out s: sum = sum(x); out top: gather = x; }").function("f")
    x = synk.data(np.zeros(10, dtype=np.int64))
    x.data[:] = np.arange(10)
    x[9] = 100
    r = f(x)
    assert r["s"] == 136 and r["top"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 100]


def test_a_python_child_process_leaves_the_group_alone():
    # os.fork() after synk.fork(): the child may not use the master's group, may close its copy and
    # fork a group of its own, and its exit (atexit, C++ static destructors) must not end the
    # parent's group or remove its shared memory.
    code, out, err = run_script("""
        synk.fork(2)
        f = synk.compile("fn f(scatter x: f64[n]) { out s: sum = sum(x); }").function("f")
        x = synk.data(np.arange(10.0))
        pid = os.fork()
        if pid == 0:
            try:
                f(x)                                # the master's group: refused here
                os._exit(3)
            except synk.UsageError as e:
                if "forked from synk's master" not in str(e):
                    os._exit(4)
            del x                                   # destroys the child's copy of the Data
            synk.close()                            # ends the child's copy only
            synk.fork(2)                            # a group of the child's own
            if float(f(synk.data(np.arange(4.0)))) != 6:
                os._exit(5)
            sys.exit(0)                             # atexit: synk.close(); then C++ static destructors
        assert os.waitpid(pid, 0)[1] == 0
        print("SUM", float(f(x)))
        print("PREFIX", segment_prefix(x))
        print("WORKERS", synk.worker_pid(1))
    """)
    assert code == 0, err
    assert value_of(out, "SUM") == ["45.0"]
    assert_nothing_left(value_of(out, "PREFIX")[0], [int(p) for p in value_of(out, "WORKERS")])


def test_verbose_says_when_ranks_share_cpus(tmp_path):
    # Three ranks on the one CPU that taskset leaves: SYNK_VERBOSE says so (the wait policy then
    # does not spin); with a CPU per rank it says nothing of sharing.
    script = "import synk; synk.fork(int(__import__('sys').argv[1])); synk.close()"
    env = dict(os.environ, SYNK_VERBOSE="1")
    shared = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", script, "3"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert shared.returncode == 0, shared.stderr
    assert ("synk: fork: 3 ranks share the 1 CPU this process may use (0): each runs at a fraction of a "
            "core, and they wait without spinning") in shared.stderr.splitlines(), shared.stderr
    alone = subprocess.run([sys.executable, "-c", script, "1"], env=env, capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and "share" not in alone.stderr, alone.stderr
