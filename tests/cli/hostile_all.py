#!/usr/bin/python3
"""Every archive-reading command on every file in testdata/hostile/.

    hostile_all.py TSARCHIVE TESTDATA [-j N] [-v]

For each file and each command in COMMANDS it runs the real binary under a
time limit and a memory bound, and checks:
- the exit code is 3 (invalid input) or 5 (libtorch failed), or one that
  EXPECTED lists for that file and command (files that are legitimately
  fine for some commands: nothing gets 0 unless listed);
- no signal, no exit >= 128 (a crash, or a kill by a limit);
- a failure prints exactly one `tsarchive: error:` line on stderr;
- no raw terminal control (C0 other than tab and newline, DEL, C1, bidi
  overrides) on stdout or stderr, except `extra get`'s exact bytes;
- `run --no-validate` hands every file to libtorch itself (in its worker
  process): whatever libtorch does, tsarchive exits 0, 1, 3 or 5;
- `stamp` in place leaves the file byte-identical when it fails;
- bounded time (TIME_LIMIT) and memory: an address-space limit for commands
  that never load libtorch, the child's max RSS (wait4) for those that do
  (libtorch maps far more than it uses, so RLIMIT_AS would measure nothing;
  the same for every command of an AddressSanitizer build).
Prints files tried, commands run and the count per exit code.

New commands: one line in COMMANDS. `optional` commands run only when
`tsarchive --help` lists them.
"""

import collections
import concurrent.futures
import filecmp
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

TIME_LIMIT = 60            # seconds per command (a normal one takes < 2 s)
AS_LIMIT = 2 << 30         # address space of commands without libtorch
RSS_LIMIT_KB = 2 << 20     # max resident set of commands with libtorch (2 GiB)

# name, arguments ({f}: the hostile file or its copy, {good}: a valid archive,
# {out}: a path in a fresh temp folder), needs libtorch, only if --help lists it.
COMMANDS = [
    ("inspect", ["inspect", "{f}"], False, None),
    ("inspect --records", ["inspect", "--records", "{f}"], False, None),
    ("inspect --code", ["inspect", "--code", "{f}"], False, None),
    ("inspect --json", ["inspect", "--json", "{f}"], False, None),
    ("extra list", ["extra", "list", "{f}"], False, None),
    ("extra get", ["extra", "get", "{f}", "labels.json"], False, None),
    ("verify", ["verify", "{f}"], False, None),
    ("verify --load", ["verify", "--load", "{f}"], True, None),
    ("diff", ["diff", "{good}", "{f}"], False, None),
    ("run", ["run", "{f}", "--input", "1x8"], True, None),
    ("stamp -o", ["stamp", "--no-git", "--no-host", "{f}", "-o", "{out}"], True, None),
    ("stamp in place", ["stamp", "--no-git", "--no-host", "{f}"], True, None),
    # --allow-drop: most hostile files are the MLP with its exported `scaled`, which a trace cannot keep.
    ("trace", ["trace", "{f}", "--input", "1x8", "--allow-drop", "-o", "{out}"], True, "trace"),
    ("convert", ["convert", "{f}", "--input", "1x8", "--freeze", "-o", "{out}"], True, "convert"),
    # Past the gate: libtorch itself gets every file, in its worker process.
    ("run --no-validate", ["run", "{f}", "--input", "1x8", "--no-validate", "--memory-limit", "1G"], True, None),
]

# Exit codes a command may give on every file. Without the gate libtorch may
# load and run a damaged archive (0) or compute NaN from it (1); what matters
# is that its crashes and allocations stay in the worker: never a signal here,
# one error line, memory within --memory-limit.
UNCHECKED = {"run --no-validate": {0, 1}}

# The exit codes a file may give besides 3 and 5, per command ("*": all).
# Nothing else may succeed. Read-only views may legitimately succeed on a
# damaged archive when they do not touch the damage, and say so:
#   inspect     lists what it found under "Problems" (exit 0, like unzip -l);
#   inspect --code / extra list / extra get read only code/ or extra/;
#   diff        exit 1: the file differs from mlp_scripted.pt, which is true.
# verify, verify --load, run and stamp (the gate) succeed only where listed.
INSPECT = ("inspect", "inspect --records", "inspect --code", "inspect --json")
EXTRA = ("extra list", "extra get")


def allow(*commands, diff=False):
    table = {c: {0} for group in commands for c in ((group,) if isinstance(group, str) else group)}
    if diff:
        table["diff"] = {1}
    return table


EXPECTED = {
    # The control and a valid ZIP variant: everything works; diff sees the
    # dropped *.debug_pkl records (exit 1).
    "ok_rebuilt.pt": {"*": {0}, "diff": {1}},
    "junk_after_in_comment.pt": {"*": {0}, "diff": {1}},
    # .ptl files are stamped with --keep-bytes, which never loads them, so an
    # unreadable bytecode version is no reason to refuse (cmd_stamp.cc).
    "ptl_bytecode_version_huge.ptl": {**allow(INSPECT, EXTRA, diff=True), "stamp -o": {0}, "stamp in place": {0}},
    # Damage in a record only the gate reads (CRCs are checked by verify, not
    # by inspect, which lists sizes and pickles): views work.
    "bad_crc_tensor.pt": allow(INSPECT, EXTRA, diff=True),
    "bad_crc_data_pkl.pt": allow("inspect --code", EXTRA),
    "usize_too_small.pt": allow(INSPECT, EXTRA),
    # The same lies in the central directory only, with PyTorch 1.13's local
    # headers (bit 3, zeros): the content reader refuses them, views as above.
    "bad_crc_data_pkl_descriptor.pt": allow("inspect --code", EXTRA),
    "usize_too_small_descriptor.pt": allow(INSPECT, EXTRA),
    "bomb_code_lying_descriptor.pt": allow(EXTRA),
    # Damage in code/: extra/ is readable.
    "bad_crc_code.pt": allow(EXTRA),
    "corrupt_deflate_code.pt": allow(EXTRA),
    "usize_too_big_code.pt": allow(EXTRA),
    "usize_too_small_code.pt": allow(EXTRA),
    "bomb_code.pt": allow(EXTRA),
    "bomb_code_lying.pt": allow(EXTRA),
    "code_not_utf8.pt": allow("inspect --code", EXTRA),
    # Broken pickles: code/ and extra/ are readable.
    "constants_pkl_garbage.pt": allow("inspect --code", EXTRA),
    "constants_pkl_truncated.pt": allow("inspect --code", EXTRA),
    "missing_data_pkl.pt": allow("inspect --code", EXTRA),
    "pkl_inst_opcode.pt": allow("inspect --code", EXTRA),
    "pkl_lying_length.pt": allow("inspect --code", EXTRA),
    "pkl_lying_length8.pt": allow("inspect --code", EXTRA),
    "pkl_memo_bomb.pt": allow("inspect --code", EXTRA),
    "pkl_node_flood.pt": allow("inspect --code", EXTRA),
    "pkl_truncated.pt": allow("inspect --code", EXTRA),
    "pkl_unknown_opcode.pt": allow("inspect --code", EXTRA),
    "ptl_bytecode_truncated.ptl": allow("inspect --code", EXTRA, diff=True),
    # inspect reads these and lists the problem the gate refuses them for.
    "empty_data_record.pt": allow(INSPECT, EXTRA, diff=True),
    "short_data_record.pt": allow(INSPECT, EXTRA, diff=True),
    "missing_data_record.pt": allow(INSPECT, EXTRA, diff=True),
    "missing_constants_pkl.pt": allow(INSPECT, EXTRA, diff=True),
    "huge_usize_zip64.pt": allow(INSPECT, EXTRA, diff=True),
    "pkl_deep_nesting.pt": allow(INSPECT, EXTRA, diff=True),
    "pkl_huge_numel.pt": allow(INSPECT, EXTRA, diff=True),
    "pkl_huge_sizes.pt": allow(INSPECT, EXTRA, diff=True),
    "pkl_self_cycle.pt": allow(INSPECT, EXTRA, diff=True),
    # The walk stops at its bound on path text (a problem note): the views work.
    "pkl_memo_long_paths.pt": allow(INSPECT, EXTRA, diff=True),
    "renamed_buffers.pt": allow(INSPECT, EXTRA, diff=True),
    "renamed_parameters.pt": allow(INSPECT, EXTRA, diff=True),
    "version_disagree.pt": allow(INSPECT, EXTRA, diff=True),
    "version_disagree_in_range.pt": allow(INSPECT, EXTRA, diff=True),
    "version_missing.pt": allow(INSPECT, EXTRA, diff=True),
    # A version newer than libtorch reads is not damage: stamp writes it byte
    # for byte (--keep-bytes) with a note rather than re-save it (cmd_stamp.cc).
    "version_too_new.pt": {**allow(INSPECT, EXTRA, diff=True), "stamp -o": {0}, "stamp in place": {0}},
    "version_zero.pt": allow(INSPECT, EXTRA, diff=True),
    # A version record that is not a number: inspect refuses, diff compares
    # the record bytes.
    "version_huge.pt": allow("inspect --code", EXTRA, diff=True),
    "version_negative.pt": allow("inspect --code", EXTRA, diff=True),
    "version_not_a_number.pt": allow("inspect --code", EXTRA, diff=True),
    # Valid archives whose extra/ holds what used to crash or reach the
    # terminal raw: everything works, its output escaped; diff sees
    # the dropped *.debug_pkl records and the added extra file (exit 1).
    "extra_json_deep.pt": {"*": {0}, "diff": {1}},
    "name_control_chars.pt": {"*": {0}, "diff": {1}},
    "extra_terminal_controls.pt": {"*": {0}, "diff": {1}},
    # A producer_info.json without tsarchive's _type is its producer's own
    # not a stamp: verify says so (exit 0); stamp keeps it and
    # writes the stamp beside it; the views and run do not need it.
    "stamp_json_deep.pt": {"*": {0}, "diff": {1}},
}
# Hostile .pt2 files: their damage is in JSON records, so extra/
# lists (empty); verify --load is a usage error on any .pt2 (exit 2: a
# package's compiled code is loaded only by run).
for _name in ("pt2_aoti_odd_names.pt2", "pt2_huge_shape.pt2", "pt2_json_bomb.pt2", "pt2_json_huge_string.pt2",
              "pt2_weight_path_escape.pt2", "pt2_hidden_program.pt2"):
    EXPECTED[_name] = {"extra list": {0}, "verify --load": {2}}

# ZIPs the layout parser refuses for names a loader still reads (a NUL, a name
# twice): crafted, so verify and inspect say unsafe (exit 8); the other
# commands refuse them (exit 3).
for _name in ("duplicate_names.pt", "duplicate_data_pkl.pt", "nul_in_name.pt"):
    EXPECTED[_name] = {"verify": {8}, "verify --load": {8}, "inspect": {8}, "inspect --records": {8},
                       "inspect --json": {8}}

# Files ZIP readers read differently: the layout parser refuses
# them before anything else, so every command, --no-validate included, must
# exit 3 (a 5 would mean libtorch saw the file).
LAYOUT_REFUSED = {
    "comment_hides_archive.pt", "comment_is_archive.pt", "comment_end_signature.pt",
    "case_twin_data_pkl.pt", "case_twin_code.pt", "case_twin_extra.pt",
    "local_method_differs.pt", "local_encrypted_flag.pt", "local_crc_differs.pt", "local_sizes_differ.pt",
    "zip64_locator_elsewhere.pt", "zip64_classic_disagrees.pt", "gap_before_end_records.pt", "cd_count_short.pt",
    "name_not_utf8.pt",
}

# Raw terminal controls must never reach stdout or stderr (escape_text,
# src/cli/output.h), except in `extra get`'s stdout, which is the file's exact
# bytes by design (to a terminal it escapes them; tests/unit/test_escape_and_bounded_json.cc
# and tests/cli/terminal_output.py check that).
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)|\xc2[\x80-\x9f]|\xd8\x9c|"
                         rb"\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
BYTE_EXACT_STDOUT = {"extra get"}


def listed_commands(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        words = line.split()
        if words and line.startswith("  "):
            names.add(words[0])
    return names


def limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def address_sanitized(binary):
    """AddressSanitizer reserves terabytes of shadow address space, so an
    ASan build (TSARCHIVE_SANITIZE) is measured by max RSS like libtorch."""
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True)
    return "libasan" in ldd.stdout


SANITIZED = False  # set by main()


def run_one(binary, testdata, path, command):
    name, args, torch, _ = command
    by_rss = torch or SANITIZED
    base = os.path.basename(path)
    tmp = tempfile.mkdtemp(prefix="hostile_")
    try:
        target = path
        if name.startswith("stamp"):  # never write near the corpus
            target = os.path.join(tmp, base)
            shutil.copyfile(path, target)
        argv = [binary] + [a.format(f=target, good=os.path.join(testdata, "mlp_scripted.pt"),
                                    out=os.path.join(tmp, "out.pt")) for a in args]
        rss_file = os.path.join(tmp, "max_rss_kb")
        if by_rss:  # exits 128+N when the command dies of signal N
            argv = ["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file] + argv
        env = dict(os.environ, SOURCE_DATE_EPOCH="0")
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                cwd=tmp, env=env, preexec_fn=None if by_rss else limit_address_space)
        try:
            out, err = proc.communicate(timeout=TIME_LIMIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return (base, name, None, "hung: killed after %d s" % TIME_LIMIT)
        elapsed = time.monotonic() - start
        rc = proc.returncode
        problems = []
        allowed = {3, 5} | UNCHECKED.get(name, set())
        allowed |= EXPECTED.get(base, {}).get(name, EXPECTED.get(base, {}).get("*", set()))
        if base in LAYOUT_REFUSED:
            allowed = {3}
        if rc < 0 or rc >= 128:
            problems.append("killed by signal %d" % -rc if rc < 0 else "exit %d (signal?)" % rc)
        elif rc not in allowed:
            problems.append("exit %d, expected one of %s" % (rc, sorted(allowed)))
        text = err.decode("utf-8", "replace")
        errors = [l for l in text.splitlines() if l.startswith("tsarchive: error:")]
        if rc not in (0, 1) and len(errors) != 1:
            problems.append("%d 'tsarchive: error:' lines on stderr" % len(errors))
        for stream, data in (("stdout", out), ("stderr", err)):
            if stream == "stdout" and name in BYTE_EXACT_STDOUT:
                continue
            raw = RAW_CONTROL.search(data)
            if raw:
                problems.append("raw control %r on %s near %r" % (raw.group(), stream,
                                                                   data[max(0, raw.start() - 40):raw.end() + 10]))
        if name == "stamp in place" and rc != 0 and not filecmp.cmp(path, target, shallow=False):
            problems.append("failed, and changed the file it was given")
        if by_rss and os.path.exists(rss_file):
            with open(rss_file) as f:
                rss = [int(w) for w in f.read().split() if w.isdigit()]
            if rss and rss[-1] > RSS_LIMIT_KB:
                problems.append("max RSS %d MiB, over %d MiB" % (rss[-1] >> 10, RSS_LIMIT_KB >> 10))
        if problems:
            problems.append("stderr: " + text.strip()[-300:])
        return (base, name, rc, "; ".join(problems), elapsed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    global SANITIZED
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    binary, testdata = os.path.abspath(args[0]), os.path.abspath(args[1])
    SANITIZED = address_sanitized(binary)
    jobs = 2
    if "-j" in sys.argv:
        jobs = int(sys.argv[sys.argv.index("-j") + 1])
    verbose = "-v" in sys.argv
    available = listed_commands(binary)
    commands = [c for c in COMMANDS if c[3] is None or c[3] in available]
    skipped = [c[0] for c in COMMANDS if c not in commands]
    folder = os.path.join(testdata, "hostile")
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder))
    unknown = (set(EXPECTED) | LAYOUT_REFUSED) - {os.path.basename(f) for f in files}
    if unknown:
        print("EXPECTED names files that are not there: %s" % sorted(unknown))
        return 1

    counts = collections.Counter()
    failures = []
    slowest = (0.0, "")
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_one, binary, testdata, f, c) for f in files for c in commands]
        for fut in futures:
            base, name, rc, problem, *rest = fut.result()
            counts[rc if rc is not None else "timeout"] += 1
            if rest and rest[0] > slowest[0]:
                slowest = (rest[0], "%s %s" % (name, base))
            if verbose:
                print("%-28s %-18s exit %s %s" % (base, name, rc, problem))
            if problem:
                failures.append("%s: %s: %s" % (base, name, problem))

    for f in failures:
        print("FAIL " + f)
    print("hostile files tried: %d; commands per file: %d (%s)%s" % (
        len(files), len(commands), ", ".join(c[0] for c in commands),
        "; not in this build: " + ", ".join(skipped) if skipped else ""))
    print("commands run: %d; by exit code: %s" % (
        sum(counts.values()), ", ".join("%s: %d" % (k, counts[k]) for k in sorted(counts, key=str))))
    print("slowest: %.1f s (%s); failures: %d" % (slowest[0], slowest[1], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
