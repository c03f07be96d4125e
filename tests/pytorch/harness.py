"""What the tests against real PyTorch share: recording failures, and running
the tsarchive binary with the exit code and the one-line error the CLI
contract promises. The checks import it from their own folder:

    from harness import check, tsarchive, finish
"""

import subprocess
import sys

failures = []


def check(condition, what):
    """Records a failure (and prints it) instead of stopping at the first."""
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def tsarchive(binary, *args, want=0, timeout=600):
    """Runs the binary; checks its exit code and, when it fails, that stderr is
    exactly one `tsarchive: error:` line."""
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    check(p.returncode == want, f"tsarchive {' '.join(args)}: exit {p.returncode}, wanted {want}\n{p.stderr}")
    if want != 0:
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
