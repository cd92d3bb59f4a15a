#!/usr/bin/env python3
"""The documentation stays inside the repository: every relative Markdown link in README.md and
docs/ (and its subfolders) resolves to a file of the repository, and no page points outside it (`../shared`, a
path above the repository root). Prints `file:line: ...` per problem and exits 1 if there is any.
Usage: check_docs.py SOURCE_ROOT
"""
import os
import re
import sys

from report import report

LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
OUTSIDE = re.compile(r"\.\./shared|\.\./\.library")


def check(root, page, problems):
    base = os.path.dirname(os.path.join(root, page))
    with open(os.path.join(root, page), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if OUTSIDE.search(line):
                problems.append(f"{page}:{number}: points outside the repository: {line.strip()[:100]}")
            for target, _ in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue   # http:, mailto:
                path = os.path.normpath(os.path.join(base, target))
                if not path.startswith(os.path.abspath(root)) and not path.startswith(root):
                    problems.append(f"{page}:{number}: link leaves the repository: {target}")
                elif not os.path.exists(path):
                    problems.append(f"{page}:{number}: broken link: {target}")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = ["README.md"] + sorted(os.path.relpath(os.path.join(folder, n), root)
                                   for folder, _, names in os.walk(os.path.join(root, "docs"))
                                   for n in names if n.endswith(".md"))
    problems = []
    for page in pages:
        check(root, page, problems)
    return report(problems, f"docs: {len(pages)} pages checked, {len(problems)} problems")


if __name__ == "__main__":
    sys.exit(main())
