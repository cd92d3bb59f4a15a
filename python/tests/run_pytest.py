"""Runs pytest on the test files given, for CTest (python/CMakeLists.txt): exits 77, which CTest
reports as "Skipped", with the reason on stdout when this interpreter lacks numpy or pytest or
the built extension, so a machine without them shows a visible skip instead of a failure.
Usage: run_pytest.py TEST_FILE... (with PYTHONPATH pointing at build/python)
"""
import importlib
import sys


def main():
    for name in ("numpy", "pytest"):
        try:
            importlib.import_module(name)
        except ImportError as e:
            print(f"SKIPPED: {sys.executable} has no {name} ({e}); install python3-{name} "
                  f"(scripts/install-deps.sh)")
            return 77
    try:
        importlib.import_module("synk")
    except ImportError as e:
        print(f"SKIPPED: the extension synk._synk cannot be imported ({e}); is PYTHONPATH build/python?")
        return 77
    import pytest
    return pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
