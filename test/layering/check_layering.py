#!/usr/bin/env python3
"""The layering of synk's source tree, checked: every #include of a library source points down.

docs/architecture.md draws the layers; RULES below is the same picture as data. A source file
(not a test, not a test helper, not a forwarding header kept at an old path) may include only
headers of the folders its rule lists. Also: only compiler/llvm/ includes Clang or LLVM headers,
no library header includes a test helper, and no header includes itself through others (a cycle,
e.g. synk.h -> collectives.h -> synk.h). Prints every violation as
`file:line: includes "x" (folder may use: ...)` and exits 1 if there is any.
Usage: check_layering.py SOURCE_ROOT
"""
import os
import re
import sys

from report import report

# Folder prefix -> the folder prefixes its sources may include (a folder may always include itself).
# The longest matching prefix wins, so subfolders can be stricter than their parent.
RULES = {
    "base/": [],
    "gpu/": ["base/"],
    "ir/": ["base/"],
    "dsl/": ["base/", "ir/"],
    # The process group knows no command: the call engine, the collectives and the data layer
    # register with it; it includes nothing of theirs.
    "runtime/group/": ["base/", "gpu/", "runtime/trace/"],
    # The timeline's recorder: below everything that records spans (the group, the call engine,
    # the collectives, the compiler's CPU functions).
    "runtime/trace/": ["base/"],
    "runtime/data/": ["base/", "gpu/", "runtime/group/", "runtime/call/descriptor.h"],
    "runtime/node/": ["base/", "runtime/group/", "runtime/node/"],
    "runtime/call/": ["base/", "gpu/", "runtime/group/", "runtime/data/", "runtime/node/", "runtime/trace/"],
    "runtime/coll/": ["base/", "gpu/", "runtime/group/", "runtime/data/", "runtime/call/", "runtime/node/",
                      "runtime/trace/"],
    "runtime/": ["base/", "gpu/", "runtime/"],
    # The compiler sees the runtime only through the descriptor and its element helpers.
    # backend_function.h: a BackendFunction runs on the device the rank's group computes on.
    "compiler/": ["base/", "gpu/", "ir/", "dsl/", "runtime/call/descriptor.h", "runtime/call/step_profile.h",
                  "runtime/trace/trace.h", "runtime/data/dtype.h", "runtime/group/backend.h", "compiler/"],
    "compiler/passes/": ["base/", "ir/", "compiler/codegen/scalar_semantics.h", "compiler/passes/"],
    # The CPU library steps of conv2d and pooling: below compiler/cpu, over the shape rules in ir/.
    "compiler/dnn/": ["base/", "ir/", "compiler/dnn/"],
    "compiler/grad/": ["base/", "ir/", "dsl/", "compiler/grad/"],
    # The shared emitter knows no dialect; the dialects know nothing of each other.
    "compiler/codegen/": ["base/", "ir/", "compiler/passes/", "compiler/codegen/"],
    "compiler/cpu/": ["base/", "ir/", "compiler/dnn/", "runtime/call/descriptor.h", "runtime/call/step_profile.h",
                      "runtime/trace/trace.h", "runtime/data/dtype.h", "compiler/passes/", "compiler/codegen/", "compiler/backend/",
                      "compiler/cpu/"],
    "compiler/cuda/": ["base/", "gpu/", "ir/", "runtime/call/descriptor.h", "runtime/data/dtype.h",
                       "compiler/passes/", "compiler/codegen/", "compiler/backend/", "compiler/cuda/"],
    # The host half below both dialects.
    "compiler/backend/": ["base/", "gpu/", "ir/", "runtime/call/descriptor.h", "runtime/data/dtype.h",
                          "compiler/passes/", "compiler/backend/"],
    "synk/": ["base/", "gpu/", "ir/", "dsl/", "runtime/", "compiler/", "synk/"],
    "tools/": ["base/", "gpu/", "ir/", "dsl/", "runtime/", "compiler/", "synk/", "tools/"],
    # The Python extension wraps the public face only: synk's API headers and base's errors/dtypes.
    "python/": ["base/", "synk/", "python/"],
}
# Upward includes that are known and explained, each to be removed by a later change. The check
# fails on any other upward include, and on an entry here that no longer occurs (so the list only
# shrinks).
KNOWN_UPWARD = set()   # empty: every include points down
LIBRARY_ROOTS = ("base/", "gpu/", "ir/", "dsl/", "runtime/", "compiler/", "synk/", "tools/", "python/")
LLVM_FOLDER = "compiler/llvm/"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
TEST_HELPERS = ("testing.h", "test_util.h", "emulator.h")
KNOWN_SEEN = set()
HEADER_INCLUDES = {}   # header -> the library headers it includes


def is_test_file(path):
    name = os.path.basename(path)
    return name.endswith("_test.cpp") or name.endswith("_fuzz.cpp") or name.endswith(TEST_HELPERS)


def is_forwarding_header(text):
    return text.startswith("// Forwarding header")


def rule_for(path):
    best = None
    for prefix in RULES:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def allowed(path, target, rule):
    if target.startswith(os.path.dirname(path) + "/"):
        return True
    if target.startswith(rule):
        return True
    return any(target == p or (p.endswith("/") and target.startswith(p)) for p in RULES[rule])


def check_file(root, path, problems):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        text = f.read()
    if is_forwarding_header(text):
        return
    rule = rule_for(path)
    for number, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        bracket, target = m.groups()
        if bracket == "<":
            if (target.startswith("llvm/") or target.startswith("clang/")) and not path.startswith(LLVM_FOLDER):
                problems.append(f"{path}:{number}: includes <{target}> (only {LLVM_FOLDER} may use Clang/LLVM)")
            continue
        if not target.startswith(LIBRARY_ROOTS):
            continue
        if path.endswith(".h"):
            HEADER_INCLUDES.setdefault(path, []).append(target)
        if target.endswith(TEST_HELPERS):
            problems.append(f"{path}:{number}: includes the test helper \"{target}\"")
        elif (path, target) in KNOWN_UPWARD:
            KNOWN_SEEN.add((path, target))
        elif not allowed(path, target, rule):
            uses = ", ".join(RULES[rule]) or "nothing of synk's"
            problems.append(f'{path}:{number}: includes "{target}" ({rule} may use: {uses})')


def include_cycles():
    """Every cycle among library headers, each as the path that closes it."""
    cycles, state = [], {}

    def visit(header, stack):
        state[header] = "open"
        for target in HEADER_INCLUDES.get(header, []):
            if state.get(target) == "open":
                cycles.append(" -> ".join(stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[header] = "done"

    for header in sorted(HEADER_INCLUDES):
        if header not in state:
            visit(header, [header])
    return cycles


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    files = 0
    for top in LIBRARY_ROOTS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if is_test_file(path):
                    continue
                files += 1
                check_file(root, path, problems)
    problems += [f"include cycle: {c}" for c in include_cycles()]
    for path, target in sorted(KNOWN_UPWARD - KNOWN_SEEN):
        problems.append(f'{path}: no longer includes "{target}": remove it from KNOWN_UPWARD')
    return report(problems, f"layering: {files} library sources checked, {len(problems)} problems, "
                            f"{len(KNOWN_SEEN)} known upward includes (KNOWN_UPWARD)")


if __name__ == "__main__":
    sys.exit(main())
