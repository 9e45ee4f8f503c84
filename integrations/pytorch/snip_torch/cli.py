"""Locating and running the `snip` command-line tool (the workbench's C++ engine)."""
import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional


class SnipNotFound(RuntimeError):
    pass


def find_snip(explicit: Optional[str] = None) -> str:
    """Path of the `snip` executable: `explicit`, else $SNIP_BIN, else `snip` on PATH, else a
    build directory of the checkout this package lives in (build*/app/snip, newest first)."""
    for cand in (explicit, os.environ.get("SNIP_BIN")):
        if cand:
            if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
                raise SnipNotFound(f"snip executable '{cand}' does not exist or is not executable; "
                                   "build it (ninja -C build snip) or fix SNIP_BIN")
            return cand
    on_path = shutil.which("snip")
    if on_path:
        return on_path
    repo = Path(__file__).resolve().parents[3]
    builds = sorted(repo.glob("build*/app/snip"), key=lambda p: p.stat().st_mtime, reverse=True)
    if builds:
        return str(builds[0])
    raise SnipNotFound("cannot find the `snip` executable: set SNIP_BIN=/path/to/snip, put it on PATH, "
                       "or build it in the checkout (cmake -S . -B build -G Ninja && ninja -C build snip)")


def run_snip(args: List[str], snip: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `snip ARGS...`, returning the completed process (stdout/stderr as text). With
    check, a non-zero exit raises RuntimeError carrying snip's own error message."""
    exe = find_snip(snip)
    proc = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`snip {' '.join(map(str, args))}` failed with exit code {proc.returncode}: "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc
