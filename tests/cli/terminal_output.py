#!/usr/bin/python3
"""What reaches a terminal from an archive's extra files.

    terminal_output.py TSARCHIVE TESTDATA

Runs `extra get` and `inspect --extra` with stdout on a pseudo-terminal, as a
person would, and checks that a file whose text holds a CR, U+009B (the C1
form of ESC [) and U+202E (right-to-left override) is shown escaped with one
note saying how to get the bytes, that binary content is refused, and that the
same commands into a pipe still give the exact bytes.
"""

import os
import pty
import subprocess
import sys
import tempfile
import termios

CONTENT = "cat\rdog \u009b2J fake \u202eevil.txt\n".encode("utf-8")
SHOWN = b"cat\\rdog \\u009b2J fake \\u202eevil.txt\n"


def on_terminal(argv):
    """Runs argv with stdout on a pty; returns (exit code, stdout bytes, stderr text)."""
    master, slave = pty.openpty()
    # No output post-processing (\n -> \r\n), so the bytes are what was written.
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    err = proc.stderr.read().decode("utf-8", "replace")
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, err


RAISER = """
import sys
import torch
class Raiser(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.message = sys.argv[2]
    def forward(self, x):
        if bool(x.sum() > -1.0):
            raise RuntimeError(self.message)
        return x
torch.jit.script(Raiser()).save(sys.argv[1])
"""


def verbose_exception(binary, check):
    """run --verbose prints libtorch's full message, which quotes the model's
    exception: an OSC title, a clear-screen, a CR and U+202E in it reach
    stderr escaped, as in the one error line."""
    message = "\x1b]0;owned\x07\x1b[2J\rfake line \u202eevil"
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "raiser.pt")
        script = os.path.join(tmp, "make_raiser.py")  # torch.jit.script reads the class's source
        with open(script, "w") as f:
            f.write(RAISER)
        made = subprocess.run([sys.executable, script, model, message], capture_output=True, text=True)
        if made.returncode != 0:
            print("skip run --verbose on a model's exception: no torch in %s" % sys.executable)
            return
        for verbose in ([], ["--verbose"]):
            p = subprocess.run([binary, "run", *verbose, model, "--input", "2"], capture_output=True)
            err = p.stderr.decode("utf-8", "replace")
            name = "run %son an exception with terminal controls" % (verbose[0] + " " if verbose else "")
            check(name + ": exit 5", p.returncode == 5, "exit %d, %r" % (p.returncode, err))
            check(name + ": no control or bidi character on stderr",
                  not any(c in err for c in "\x1b\x07\r\u202e"), repr(err))
        check("run --verbose shows the message escaped",
              "\\x1b]0;owned\\x07\\x1b[2J\\rfake line \\u202eevil" in err, repr(err))


def main():
    binary, testdata = sys.argv[1], sys.argv[2]
    model = os.path.join(testdata, "hostile", "extra_terminal_controls.pt")
    failures = []

    def check(what, ok, detail=""):
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if not ok else ""))
        if not ok:
            failures.append(what)

    for argv in ([binary, "extra", "get", model, "notes.txt"], [binary, "inspect", "--extra", "notes.txt", model]):
        name = " ".join(argv[1:3])
        rc, out, err = on_terminal(argv)
        check(name + " to a terminal: exit 0", rc == 0, "exit %d, %s" % (rc, err))
        check(name + " to a terminal: escaped", out == SHOWN, repr(out))
        check(name + " to a terminal: one note naming -o or a pipe",
              err.count("\n") == 1 and err.startswith("tsarchive: note: extra file 'notes.txt' has control")
              and ("-o FILE" in err or "redirect" in err), err)
        piped = subprocess.run(argv, capture_output=True)
        check(name + " into a pipe: the exact bytes", piped.returncode == 0 and piped.stdout == CONTENT
              and piped.stderr == b"", repr(piped.stdout))

    # Names with ESC, CR and LF: the table on a terminal holds them escaped.
    rc, out, err = on_terminal([binary, "extra", "list", os.path.join(testdata, "hostile", "name_control_chars.pt")])
    check("extra list of control-character names to a terminal",
          rc == 0 and b"\x1b" not in out and b"\r" not in out and b"red\\x1b[31mtext" in out
          and len(out.splitlines()) == 7, repr(out))

    # Text without controls is written as it is; binary is refused on a
    # terminal (exit 2, nothing written) and exact into a pipe.
    rc, out, err = on_terminal([binary, "extra", "get", os.path.join(testdata, "mlp_scripted.pt"), "labels.json"])
    check("text without controls to a terminal: as it is", rc == 0 and out.startswith(b'{"classes"'), repr(out))
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "model.pt")
        value = os.path.join(tmp, "value")
        with open(value, "wb") as f:
            f.write(b"\x1b[2J\x00binary")
        subprocess.run([binary, "extra", "set", "-o", copy, os.path.join(testdata, "mlp_scripted.pt"),
                        "blob.bin=@" + value], check=True, capture_output=True)
        rc, out, err = on_terminal([binary, "extra", "get", copy, "blob.bin"])
        check("binary to a terminal: refused", rc == 2 and out == b"" and "is binary" in err
              and "\x1b" not in err, "exit %d, %r, %s" % (rc, out, err))
        piped = subprocess.run([binary, "extra", "get", copy, "blob.bin"], capture_output=True)
        check("binary into a pipe: the exact bytes", piped.stdout == b"\x1b[2J\x00binary", repr(piped.stdout))

        # An edited archive (-o -) carries its author's bytes: never written on a terminal
        # (review 56a, F5); into a pipe it is the archive. So for run's saved values.
        for argv in ([binary, "extra", "set", copy, "-o", "-", "k=v"], [binary, "extra", "rm", copy, "-o", "-", "blob.bin"],
                     [binary, "run", copy, "--input", "2x784", "--save-outputs", "-"]):
            rc, out, err = on_terminal(argv)
            check("%s: refused on a terminal" % " ".join(argv[1:3] + argv[4:6]),
                  rc == 2 and out == b"" and "binary, to standard output, which is a terminal" in err,
                  "exit %d, %r, %s" % (rc, out[:80], err))
        piped = subprocess.run([binary, "extra", "set", copy, "-o", "-", "k=v"], capture_output=True)
        check("-o - into a pipe: the archive", piped.returncode == 0 and piped.stdout[:4] == b"PK\x03\x04",
              "exit %d, %r" % (piped.returncode, piped.stdout[:10]))

    verbose_exception(binary, check)

    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
