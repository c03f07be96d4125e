"""What the tests against real PyTorch share: recording failures, running
the tsarchive binary with the exit code and the one-line error the CLI
contract promises, and pip-installing into a venv what Debian does not
package. The checks import it from their own folder:

    from harness import check, tsarchive, finish
"""

import fcntl
import os
import subprocess
import sys

failures = []


def check(condition, what):
    """Records a failure (and prints it) instead of stopping at the first."""
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def tsarchive(binary, *args, want=0, timeout=600, error_line=True):
    """Runs the binary; checks its exit code and, when it fails, that stderr is
    exactly one `tsarchive: error:` line (not with error_line=False: diff's and
    verify's exit 1 is an answer, not an error)."""
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    check(p.returncode == want, f"tsarchive {' '.join(args)}: exit {p.returncode}, wanted {want}\n{p.stderr}")
    if want != 0 and error_line:
        lines = p.stderr.strip().splitlines()
        check(len(lines) == 1 and lines[0].startswith("tsarchive: error: "),
              f"tsarchive {' '.join(args)}: wanted one error line, got {p.stderr!r}")
    return p


def finish(success_line):
    """Exit 1 with the failure count, or print the success line."""
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print(success_line)


def pip_venv(venv, requirements, use_own_venv=False):
    """The python of a venv with `requirements` pip-installed into it, or None,
    after one line saying why, when the venv cannot be made or pip fails (no
    network). With TSARCHIVE_PIP_REQUIRED set (CI, where PyPI is reachable),
    that is a failure instead: exit 1.

    The venv is `venv`, made with this python's site packages (Debian's torch
    and numpy stay visible); with use_own_venv, this python's own venv when it
    runs in one (scripts/dev.sh torch2's .venv, whose torch a venv made from it
    would not see). ctest runs tests in parallel: an exclusive lock on
    `venv`.lock lets one test at a time make a venv and install into it."""
    own = use_own_venv and sys.prefix != sys.base_prefix
    python = sys.executable if own else os.path.join(venv, "bin", "python")
    where = sys.prefix if own else venv
    os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(python):
            made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv])
            if made.returncode != 0:
                return _pip_failed(f"cannot make a venv at {venv} (python3-venv missing?)")
        installed = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                    *requirements])
        if installed.returncode != 0:
            return _pip_failed(f"pip could not install {' '.join(requirements)} into {where} (no network?)")
    return python


def _pip_failed(why):
    if os.environ.get("TSARCHIVE_PIP_REQUIRED"):
        print(f"FAIL: {why}; TSARCHIVE_PIP_REQUIRED is set")
        sys.exit(1)
    print(why)
    return None


def install_and_rerun(venv, requirements, use_own_venv=False):
    """For a check whose imports failed: pip-installs `requirements` (pip_venv)
    and runs this script again, with the same arguments, under that venv's
    python. Exit 77 (skipped) when that cannot be done, or when this already
    is that second run."""
    wanted = " ".join(requirements)
    if os.environ.get("TSARCHIVE_PIP_VENV") == venv:
        print(f"{wanted} does not import even from the venv it was installed in; skipping")
        sys.exit(77)
    python = pip_venv(venv, requirements, use_own_venv)
    if python is None:
        print(f"without {wanted}: skipping")
        sys.exit(77)
    os.environ["TSARCHIVE_PIP_VENV"] = venv
    os.execv(python, [python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
