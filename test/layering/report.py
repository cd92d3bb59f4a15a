"""How every check of this folder ends: each problem on its own line (`file:line: ...`), then one
summary line; the exit status is 1 when there is any problem, so that CTest fails on it.
"""


def report(problems, summary):
    for p in problems:
        print(p)
    print(summary)
    return 1 if problems else 0
