"""CTest driver for the snip_torch Python tests: exits 77 (CTest SKIP_RETURN_CODE) only when
torch itself cannot be imported, otherwise runs the named unittest modules of
integrations/pytorch/tests and exits with their status. Everything runs under the __main__
guard: torch.multiprocessing's spawn re-imports this file in its child processes."""
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path


def isolate_home() -> str:
    """A temporary XDG data/config/cache tree for this run (and every `snip` it starts), so no
    test reads or writes the user's workbench database or settings (as tests/util does for the
    C++ tests)."""
    root = tempfile.mkdtemp(prefix="snip-test-home-")
    for var, sub in (("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")):
        os.makedirs(os.path.join(root, sub))
        os.environ[var] = os.path.join(root, sub)
    return root


def main() -> int:
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}; install Debian's python3-torch (scripts/setup.sh) to run the snip_torch tests")
        return 77
    snip_bin = os.environ.get("SNIP_BIN")
    if snip_bin and not os.access(snip_bin, os.X_OK):  # CTest sets it: a missing build is a failure, not a skip
        print(f"FAIL: SNIP_BIN={snip_bin} is not an executable; build it first (ninja -C <build> snip)")
        return 1
    root = Path(__file__).resolve().parents[2] / "integrations" / "pytorch"
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(root / "tests"))
    home = isolate_home()
    try:
        suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:])
        result = unittest.TextTestRunner(verbosity=2).run(suite)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
