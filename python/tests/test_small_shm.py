"""A small /dev/shm (Docker's default is 64 MiB): each scenario runs in its own mount namespace
(`unshare -m`) with a private 64 MiB tmpfs on /dev/shm, so that filling it disturbs nothing else.
Functions made after fork() go through the group's store, whose pages are filled as it is written:
a full /dev/shm is a UsageError naming the store, never a SIGBUS. Space given back by a dropped
Data (still mapped by the workers until their next command) can be taken again at once. Skipped,
with the reason, where this process may not make a mount namespace (a container without
CAP_SYS_ADMIN).
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import synk  # noqa: F401  (the package must import here; the scenarios import it again)


def _can_mount_private_shm():
    if shutil.which("unshare") is None:
        return "no unshare command"
    p = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1M tmpfs /dev/shm"],
                       capture_output=True, text=True)
    return None if p.returncode == 0 else f"unshare -m cannot mount a tmpfs here: {p.stderr.strip()}"


WHY_NOT = _can_mount_private_shm()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))


def run_in_small_shm(body, size="64M", timeout=120):
    """Runs `body` with a private tmpfs of `size` on /dev/shm; returns (exit status, stdout,
    stderr, what the tmpfs holds afterwards)."""
    script = "import os, numpy as np, synk\n" + textwrap.dedent(body)
    shell = (f'mount -t tmpfs -o size={size} tmpfs /dev/shm && "$0" -c "$1"; rc=$?; '
             'echo "left: $(ls /dev/shm | tr "\\n" " ")" >&2; exit $rc')
    p = subprocess.run(["unshare", "-m", "sh", "-c", shell, sys.executable, script],
                       capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    left = p.stderr.rsplit("left:", 1)[-1].strip()
    return p.returncode, p.stdout, p.stderr, left


def test_a_full_store_is_a_usage_error_not_a_sigbus():
    rc, out, err, left = run_in_small_shm("""
        synk.fork(2)
        x = synk.data(np.ones((10, 4), np.float32))
        g = synk.compile("fn g(scatter x: f32[n, 4]) { out z: sum = sum(x); }").function("g")
        assert float(g(x)) == 40.0                         # the calls' own segments exist from here on
        st = os.statvfs("/dev/shm")
        big = synk.data(shape=(st.f_bavail * st.f_frsize // 4 - 1024,), dtype="float32")   # fits: accepted
        try:
            for i in range(200):
                f = synk.compile(f"fn h{i}(scatter x: f32[n, 4]) {{ out z: sum = sum(x) * {i}.0; }}").function(f"h{i}")
                assert float(f(x)) == 40.0 * i
            print("no error")
        except synk.UsageError as e:
            print("UsageError:", e)
        assert float(g(x)) == 40.0                         # the group is still usable
        synk.close()
        """)
    assert rc == 0, f"exit status {rc} (135 is a SIGBUS):\n{out}\n{err}"
    assert "UsageError: the process group's store" in out, out + err
    assert "bytes of shared memory, but /dev/shm has" in out, out
    assert left == "", f"left behind in /dev/shm: {left}"


def test_space_of_a_dropped_data_can_be_taken_again_at_once():
    rc, out, err, left = run_in_small_shm("""
        import gc
        synk.fork(2)
        f = synk.compile("fn f(scatter x: f32[n]) { out z: sum = sum(x); }").function("f")
        a = synk.data(np.ones(10_000_000, np.float32))     # 40 MB of the 64 MiB
        print("sum", float(f(a)))                          # the worker maps it
        del a; gc.collect()
        b = synk.data(np.full(10_000_000, 2, np.float32)) # needs the space the worker still maps
        print("sum", float(f(b)))
        """)
    assert rc == 0, f"exit status {rc}:\n{out}\n{err}"
    assert out.split() == ["sum", "10000000.0", "sum", "20000000.0"], out + err
    assert left == "", f"left behind in /dev/shm: {left}"
