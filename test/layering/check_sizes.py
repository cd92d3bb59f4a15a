#!/usr/bin/env python3
"""The size rules of synk's sources, checked: no source file over 800 lines, no function over 120.

Functions are found by brace matching (strings, characters and comments skipped): a brace opened
outside any function whose header (the text since the previous ';', '{' or '}') has a parameter
list and does not start with a control keyword. Lambdas and local classes count towards the
function that holds them. Prints each violation as `file:line: ...` and exits 1 if there is any.
Usage: check_sizes.py SOURCE_ROOT
"""
import os
import re
import sys

from report import report

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
ROOTS = ("base", "gpu", "ir", "dsl", "runtime", "compiler", "synk", "tools", "python", "examples", "bench")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try|return)\b")
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def strip_code(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(text):
    code = strip_code(text)
    stack = []          # per open brace: (kind, start line)
    header_start = 0    # index where the current header began
    line = 1
    found = []
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            header = code[header_start:i]
            in_function = any(kind == "function" for kind, _ in stack)
            if not in_function and ")" in header and not CONTROL.match(header) and not SCOPE.search(header):
                first = code.count("\n", 0, header_start + len(header) - len(header.lstrip())) + 1
                stack.append(("function", first))
            else:
                stack.append(("scope", line))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "function" and line - start + 1 > MAX_FUNCTION_LINES:
                    found.append((start, line - start + 1))
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems, files = [], 0
    for top in ROOTS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp", ".cu")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                files += 1
                lines = text.count("\n")
                if lines > MAX_FILE_LINES:
                    problems.append(f"{rel}:1: {lines} lines (at most {MAX_FILE_LINES})")
                for start, length in long_functions(text):
                    problems.append(f"{rel}:{start}: a function of {length} lines (at most {MAX_FUNCTION_LINES})")
    return report(problems, f"sizes: {files} sources checked, {len(problems)} over the limits")


if __name__ == "__main__":
    sys.exit(main())
