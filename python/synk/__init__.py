"""synk for Python: data-parallel tensor programs on every CPU core or GPU of the machine.

Write a computation once in the .synk language, as for one device; synk runs it on N forked
processes sharing memory and returns what one device would return. The API follows
Synkhronos' Python API (docs/python.md):

    import numpy as np, synk
    synk.fork()                                   # one process (rank) per CPU core
    m = synk.compile('''
    fn f(scatter x: f32[n, 10], bcast y: f32[10]) {
      out z: avg = mean(x @ y, axis=0);
    }''')
    f = m.function("f")
    x = synk.data(np.random.randn(100, 10).astype("float32"))   # shared memory
    z = f(x, np.ones(10, "float32"), batch=range(0, 50), num_slices=2)
    synk.close()                                  # also runs at exit

Everything here comes from the extension module synk._synk (python/src/*.cpp), a thin layer
over synk's C++ API; this file adds the result type of multi-output calls and closes the
process group when the interpreter exits.
"""
import atexit as _atexit
import contextlib as _contextlib
import sys as _sys

from ._synk import (  # noqa: F401  (the public API)
    Data, Error, Function, InternalError, LocatedUserError, Module, RankError, ScatteredRowError,
    Schedule, Shared, TrainStep, UsageError, UserError, all_gather, all_reduce, all_reduce_weighted, backend, broadcast, checkpoint_metadata, close,
    collective_defaults, compile, data, distribute, fork, forked, gather, get_lengths, get_shapes,
    get_value, info, load, load_library, load_npy, local_size, node, nodes, reduce, scatter, set_collective_defaults, set_value,
    size, trace_start, trace_stop, tracing, worker_pid,
)
from . import _synk

__version__ = "0.2.0"


class Outputs(tuple):
    """The results of a call of a function with several outputs: a tuple in output order (or
    output_subset order) whose items are also reachable by name, r["loss"], and r.names."""

    def __new__(cls, values, names):
        self = super().__new__(cls, values)
        self.names = tuple(names)
        return self

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self.names.index(key))
            except ValueError:
                raise UsageError(f"outputs: no output named '{key}' in this result "
                                 f"(it has: {', '.join(self.names)})") from None
        return tuple.__getitem__(self, key)

    def as_dict(self):
        return dict(zip(self.names, self))

    def __repr__(self):
        return "Outputs(" + ", ".join(f"{n}={v!r}" for n, v in zip(self.names, self)) + ")"


_synk._set_outputs_class(Outputs)


@_contextlib.contextmanager
def trace(path):
    """Records a timeline of every rank while the block runs, written to path when it ends
    (trace_start / trace_stop; docs/trace.md)."""
    trace_start(path)
    try:
        yield
    finally:
        trace_stop()

# The group ends with the interpreter: workers stopped, shared memory removed. (The C++ runtime
# does the same at C exit; doing it here runs it before Python tears its objects down.)
_atexit.register(close)


# Under mpirun an exception that ends one leader would leave the others waiting for it (until
# SYNK_NODE_TIMEOUT_S): after the usual traceback, the whole job ends at once (docs/multinode.md).
def _end_job_on_uncaught(kind, value, tb, _previous=_sys.excepthook):
    _previous(kind, value, tb)
    if forked() and nodes() > 1:
        said = str(value)   # KeyboardInterrupt and SystemExit() carry no text
        _synk._end_job(f"uncaught {kind.__name__} on this node" + (f": {said}" if said else " (Ctrl-C)"
                       if kind is KeyboardInterrupt else ""))


_sys.excepthook = _end_job_on_uncaught

# `compile` is left out so that `from synk import *` does not shadow the built-in; use synk.compile.
__all__ = [
    "Data", "Error", "Function", "InternalError", "LocatedUserError", "Module", "Outputs",
    "RankError", "ScatteredRowError", "Schedule", "Shared", "TrainStep", "UsageError", "UserError",
    "all_gather", "all_reduce", "all_reduce_weighted", "backend", "broadcast", "close", "collective_defaults",
    "data", "distribute", "fork", "forked", "gather", "get_lengths", "get_shapes", "get_value",
    "load", "load_library", "load_npy", "local_size", "node", "nodes", "reduce", "scatter", "set_collective_defaults",
    "set_value", "size", "trace", "trace_start", "trace_stop", "tracing", "worker_pid",
]
