"""The epoch benchmarks' way to get matplotlib: the Agg backend (no display needed), or, when the
interpreter has no matplotlib, a message saying which interpreter ran and what to do instead of a
traceback. scripts/install-deps.sh installs Debian's python3-matplotlib, which /usr/bin/python3 (the
scripts' #! line) imports; a `python3` earlier on PATH (pyenv, a virtual environment) may not.
The CSV is written before the plot, so a run is never lost."""
import sys


def pyplot(script, redraw=""):
    """redraw: how the script draws a written CSV again (e.g. "--from-csv CSV"), if it can."""
    try:
        import matplotlib
    except ImportError:
        again = f" (add {redraw} to draw this run's PNG)" if redraw else ""
        sys.exit(f"{script}: the CSV is written, but {sys.executable} cannot import matplotlib to draw the PNG; "
                 f"run it as bench/{script}, whose #! line is /usr/bin/python3 with Debian's python3-matplotlib"
                 f"{again}")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
