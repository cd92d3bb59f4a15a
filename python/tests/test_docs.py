"""The Python shown in the documentation runs: the complete example of docs/python.md and the
README's Python quick start, each in its own interpreter (they fork and close their own group).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def run(code):
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    return p.stdout


def test_python_md_complete_example():
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        text = f.read()
    section = text[text.index("## A complete example"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    run(code)


def test_readme_quick_start():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    code = re.search(r"<<'PY'\n(.*?)\nPY\n", text, re.S).group(1)
    lines = run(code).split("\n")
    a, b = map(float, lines[0].split())
    assert abs(a - b) <= 1e-5 * (1 + abs(b))
