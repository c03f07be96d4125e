#!/usr/bin/python3
"""Provenance end to end: `tsarchive stamp` and `tsarchive verify` on archives
written by real PyTorch, read back by real PyTorch.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_stamp.py TSARCHIVE TESTDATA_DIR

- Python's torch.jit.load(_extra_files=...) reads both kinds of stamp, and the
  module keeps every parameter and buffer bitwise;
- --keep-bytes leaves every other record byte-identical;
- same inputs, SOURCE_DATE_EPOCH and environment give a byte-identical stamp;
- CI variables come from a controlled environment; secrets never reach the stamp;
- git source facts, with the remote's credentials stripped, and `dirty`;
- sign-mutate-verify: one changed byte in each record kind is named, both when
  the CRC is left stale (damaged, exit 3) and when the ZIP is rebuilt around
  the change (tampered, exit 1); random single-byte flips never pass an
  archive whose records changed;
- bad input: reserved --field, bad SOURCE_DATE_EPOCH, torch.save, not a ZIP.
"""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import zipfile

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "USER": "builder",
            "SOURCE_DATE_EPOCH": "1700000000"}
failures = []
counts = {"flips": 0, "flips_passed_unchanged": 0}


def run(*args, env=None, cwd=None):
    return subprocess.run([TSARCHIVE, *args], capture_output=True, env=env or BASE_ENV, cwd=cwd, timeout=120)


def ok(result, what):
    if result.returncode != 0:
        raise AssertionError(f"{what}: exit {result.returncode}: {result.stderr.decode()}")
    return result


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def stamp_of(path):
    extra = {"producer_info.json": ""}
    torch.jit.load(path, _extra_files=extra)
    return extra["producer_info.json"]


def contents(path):
    with zipfile.ZipFile(path) as z:
        return {i.filename.split("/", 1)[1]: z.read(i) for i in z.infolist()}


def raw_entries(path):
    """Local header + data bytes of each entry, by name."""
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        data = f.read()
        infos = sorted(z.infolist(), key=lambda i: i.header_offset)
        ends = [i.header_offset for i in infos[1:]] + [z.start_dir]
        return {i.filename.split("/", 1)[1]: data[i.header_offset:end] for i, end in zip(infos, ends)}


def same_state(a_path, b_path):
    a, b = torch.jit.load(a_path), torch.jit.load(b_path)
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


work = tempfile.mkdtemp()
try:
    src = os.path.join(TESTDATA, "mlp_scripted.pt")

    # --- both ways of stamping, read back by Python ----------------------------------------
    for method, flags in (("export-hook", []), ("keep-bytes", ["--keep-bytes"])):
        path = os.path.join(work, f"{method}.pt")
        shutil.copy(src, path)
        ok(run("stamp", path, "--no-git", "--field", "team=vision", *flags), f"stamp {method}")
        stamp = json.loads(stamp_of(path))
        expect(stamp["producer"]["method"] == method, f"{method}: producer.method is {stamp['producer']}")
        expect(stamp["team"] == "vision", f"{method}: user field missing")
        expect(stamp["archive"]["name"] == "mlp_scripted", f"{method}: archive name {stamp['archive']}")
        expect(stamp["createdAt"] == "2023-11-14T22:13:20Z", f"{method}: createdAt ignores SOURCE_DATE_EPOCH")
        expect(stamp["host"] == {"name": os.uname().nodename, "user": "builder"}, f"{method}: host {stamp.get('host')}")
        records = {n: hashlib.sha256(b).hexdigest() for n, b in contents(path).items()
                   if n != "extra/producer_info.json" and not n.endswith("/")}
        expect(stamp["entries"]["records"] == records, f"{method}: digests differ from Python's sha256 of each record")
        manifest = "".join(f"{records[n]}  {n}\n" for n in sorted(records)).encode()
        expect(stamp["entries"]["root"] == hashlib.sha256(manifest).hexdigest(), f"{method}: root digest")
        expect(same_state(src, path), f"{method}: parameters or buffers changed")
        extra = {"labels.json": "", "config/train.yaml": ""}
        torch.jit.load(path, _extra_files=extra)
        orig = contents(src)
        expect(extra["labels.json"] == orig["extra/labels.json"], f"{method}: extra/labels.json lost")
        expect(ok(run("verify", path), "verify").returncode == 0, f"{method}: verify fails")
        if method == "keep-bytes":
            before, after = raw_entries(src), raw_entries(path)
            moved = [n for n in before if before[n] != after.get(n)]
            expect(not moved, f"keep-bytes changed records {moved}")

    # --- a re-save keeps the tensors' bytes, and models that rebuild them on load stamp too --
    # stamp compares the copy's tensors with the original's, path by path, by value (a
    # worker that swapped the weights is refused); a quantized conv repacks its weight on
    # load and saves other bytes of the same values, and it must still stamp.
    for name, rebuilt in (("convnet_traced.pt", False), ("quant_per_channel.pt", True)):
        path = os.path.join(work, name)
        shutil.copy(os.path.join(TESTDATA, name), path)
        ok(run("stamp", path, "--no-git"), f"stamp {name}")
        storages = lambda p: sorted(hashlib.sha256(b).hexdigest() for n, b in contents(p).items()
                                    if n.startswith(("data/", "constants/")) and not n.endswith(".pkl"))
        expect(rebuilt or storages(path) == storages(os.path.join(TESTDATA, name)), f"{name}: storages changed")
        expect(ok(run("verify", path), f"verify {name}").returncode == 0, f"{name}: verify fails")

    # --- reproducible: same inputs and environment, byte-identical stamp and file ----------
    outs = []
    for i in range(2):
        path = os.path.join(work, f"repro{i}.pt")
        shutil.copy(src, path)
        ok(run("stamp", path, "--keep-bytes", "--no-git"), "repro stamp")
        outs.append(open(path, "rb").read())
    expect(outs[0] == outs[1], "two stamps with the same SOURCE_DATE_EPOCH and environment differ")

    # --- CI from a controlled environment; no secrets --------------------------------------
    ci_env = dict(BASE_ENV, GITHUB_ACTIONS="true", GITHUB_RUN_ID="42", GITHUB_JOB="export",
                  GITHUB_SERVER_URL="https://user:s3cret@github.example", GITHUB_REPOSITORY="org/models",
                  GITHUB_TOKEN="ghp_topsecret", AWS_SECRET_ACCESS_KEY="alsosecret", CI="true")
    path = os.path.join(work, "ci.pt")
    shutil.copy(src, path)
    ok(run("stamp", path, "--keep-bytes", "--no-git", "--no-host", env=ci_env), "stamp in CI")
    text = stamp_of(path).decode()
    stamp = json.loads(text)
    expect(stamp.get("ci") == {"provider": "github-actions", "runId": "42", "job": "export",
                               "runUrl": "https://github.example/org/models/actions/runs/42"}, f"ci: {stamp.get('ci')}")
    for secret in ("s3cret", "topsecret", "alsosecret"):
        expect(secret not in text, f"a secret reached the stamp: {secret}")
    expect("host" not in stamp, "--no-host still recorded the host")
    for provider, env in (("gitlab-ci", {"GITLAB_CI": "true", "CI_PIPELINE_ID": "7", "CI_JOB_NAME": "build",
                                         "CI_JOB_URL": "https://gitlab.example/j/7"}),
                          ("jenkins", {"JENKINS_URL": "https://ci", "BUILD_NUMBER": "9", "JOB_NAME": "models",
                                       "BUILD_URL": "https://ci/job/models/9/"}),
                          ("buildkite", {"BUILDKITE": "true", "BUILDKITE_BUILD_ID": "b1", "BUILDKITE_LABEL": "export"}),
                          ("circleci", {"CIRCLECI": "true", "CIRCLE_WORKFLOW_ID": "w1", "CIRCLE_JOB": "export"}),
                          ("generic", {"CI": "1"})):
        shutil.copy(src, path)
        ok(run("stamp", path, "--keep-bytes", "--no-git", env=dict(BASE_ENV, **env)), f"stamp in {provider}")
        expect(json.loads(stamp_of(path)).get("ci", {}).get("provider") == provider, f"{provider} not recognised")
    # Odd values: very long, not UTF-8: left out with a note, never a failure.
    odd = dict(BASE_ENV, GITLAB_CI="true", CI_PIPELINE_ID="x" * 5000)
    odd_env = {k.encode(): v.encode() for k, v in odd.items()}
    odd_env[b"CI_JOB_NAME"] = b"\xff\xfe bad"
    shutil.copy(src, path)
    result = run("stamp", path, "--keep-bytes", "--no-git", env=odd_env)
    expect(result.returncode == 0 and b"ignored CI_PIPELINE_ID" in result.stderr, f"odd CI values: {result.stderr}")
    ci = json.loads(stamp_of(path)).get("ci", {})
    expect(ci == {"provider": "gitlab-ci"}, f"odd CI values kept: {ci}")

    # --- git source: commit, branch, remote without credentials, dirty ---------------------
    if shutil.which("git"):
        repo = os.path.join(work, "repo")
        os.mkdir(repo)
        git_env = dict(BASE_ENV, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
                       GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1")
        g = lambda *a: subprocess.run(["git", *a], cwd=repo, env=git_env, check=True, capture_output=True).stdout
        g("init", "-q", "-b", "release")
        g("remote", "add", "origin", "https://bot:glpat-XYZ@git.example/org/models.git")
        open(os.path.join(repo, "train.py"), "w").write("print(1)\n")
        g("add", "train.py")
        g("commit", "-q", "-m", "x")
        commit = g("rev-parse", "HEAD").decode().strip()
        path = os.path.join(repo, "m.pt")
        shutil.copy(src, path)
        ok(run("stamp", path, "--keep-bytes", cwd=repo, env=git_env), "stamp in git")
        source = json.loads(stamp_of(path)).get("source")
        expect(source == {"commit": commit, "branch": "release", "dirty": False,
                          "repo": "https://git.example/org/models.git"}, f"git source: {source}")
        open(os.path.join(repo, "train.py"), "a").write("print(2)\n")
        ok(run("stamp", path, "--keep-bytes", cwd=repo, env=git_env), "stamp dirty")
        stamp = json.loads(stamp_of(path))
        expect(stamp["source"]["dirty"] is True, "a changed tracked file is not dirty")
        # Re-stamping chains the previous stamp.
        expect("previous" in stamp and len(stamp["previous"]["stampSha256"]) == 64, "no previous chain")

    # --- no checkout: the CI's own variables name the source; the note only when nothing does --
    outside = os.path.join(work, "no-checkout")
    os.mkdir(outside)
    path = os.path.join(outside, "m.pt")
    shutil.copy(src, path)
    sha = "0123456789abcdef0123456789abcdef01234567"
    gh = dict(BASE_ENV, GITHUB_ACTIONS="true", GITHUB_SHA=sha, GITHUB_REF_NAME="main", GITHUB_RUN_ID="7",
              GITHUB_SERVER_URL="https://x:tok@github.com", GITHUB_REPOSITORY="org/models")
    result = ok(run("stamp", path, "--keep-bytes", cwd=outside, env=gh), "stamp outside a checkout, in GitHub Actions")
    source = json.loads(stamp_of(path)).get("source")
    expect(source == {"commit": sha, "branch": "main", "from": "github-actions", "repo": "https://github.com/org/models"},
           f"source from GitHub's variables: {source}")
    expect(b"git checkout" not in result.stderr, f"a git note although GITHUB_SHA names the commit: {result.stderr}")
    result = ok(run("stamp", path, "--keep-bytes", cwd=outside), "stamp outside a checkout, no CI")
    # "not inside a git checkout", or "git is not installed" on a machine without git (a tarball's).
    expect(result.stderr.count(b"note: source left out: ") == 1, f"the git note, once: {result.stderr}")
    expect("source" not in json.loads(stamp_of(path)), "a source without a checkout or CI variables")

    # --- sign, mutate, verify ----------------------------------------------------------------
    signed = os.path.join(work, "signed.pt")
    shutil.copy(src, signed)
    ok(run("stamp", signed, "--keep-bytes", "--no-git"), "stamp for mutation")
    original = contents(signed)
    kinds = ["data/0", "data.pkl", "code/__torch__/models.py", "extra/labels.json", "version", "constants.pkl"]
    with zipfile.ZipFile(signed) as z:
        infos = {i.filename.split("/", 1)[1]: i for i in z.infolist()}
    blob = open(signed, "rb").read()
    for name in kinds:
        info = infos[name]
        # (a) Tampered and re-zipped with valid CRCs: exit 1, the record named as changed.
        tampered = os.path.join(work, "tampered.pt")
        with zipfile.ZipFile(signed) as zin, zipfile.ZipFile(tampered, "w") as zout:
            for i in zin.infolist():
                data = zin.read(i)
                if i.filename == info.filename:
                    pos = len(data) // 2
                    data = data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1:]
                zout.writestr(i, data)
        result = run("verify", tampered)
        out = result.stdout.decode()
        expect(result.returncode in (1, 3) and f"changed   {name}" in out,
               f"tampered {name}: exit {result.returncode}, not named:\n{out}")
        # (b) One byte flipped in place (stale CRC): exit 3, the record named.
        if info.compress_type == zipfile.ZIP_STORED:
            header = info.header_offset
            name_len = int.from_bytes(blob[header + 26:header + 28], "little")
            extra_len = int.from_bytes(blob[header + 28:header + 30], "little")
            pos = header + 30 + name_len + extra_len + info.file_size // 2
            damaged = os.path.join(work, "damaged.pt")
            open(damaged, "wb").write(blob[:pos] + bytes([blob[pos] ^ 0x01]) + blob[pos + 1:])
            result = run("verify", damaged)
            expect(result.returncode == 3 and name in result.stdout.decode() and name in result.stderr.decode(),
                   f"flipped byte in {name}: exit {result.returncode}: {result.stdout.decode()}")

    # Random single-byte flips anywhere: never a crash, and a pass means no record changed.
    rng = random.Random(20261121)
    flipped = os.path.join(work, "flipped.pt")
    for _ in range(150):
        pos = rng.randrange(len(blob))
        open(flipped, "wb").write(blob[:pos] + bytes([blob[pos] ^ (1 << rng.randrange(8))]) + blob[pos + 1:])
        result = run("verify", flipped)
        counts["flips"] += 1
        expect(result.returncode in (0, 1, 3), f"flip at {pos}: exit {result.returncode} {result.stderr[:200]}")
        if result.returncode == 0:
            counts["flips_passed_unchanged"] += 1
            try:
                same = contents(flipped) == original
            except Exception:
                same = False
            expect(same, f"flip at {pos}: verify passed an archive whose records changed")

    # --- bad input: clear message, right exit code, file unchanged ---------------------------
    before = open(signed, "rb").read()
    for args, code, env in ((["--field", "_type=x"], 2, None), (["--field", "entries=x"], 2, None),
                            (["--field", "no-equals"], 2, None),
                            ([], 2, dict(BASE_ENV, SOURCE_DATE_EPOCH="yesterday"))):
        result = run("stamp", signed, "--keep-bytes", *args, env=env)
        expect(result.returncode == code and result.stderr.startswith(b"tsarchive: error: "),
               f"stamp {args}: exit {result.returncode}: {result.stderr}")
        expect(open(signed, "rb").read() == before, f"stamp {args} changed the archive")
    # --- records another tool put where libtorch writes its own (review 56a, F1) ----------------
    # A re-save writes only what the module references: a data/ or constants/ record no tensor
    # is stored in, a code/ file that is not Python, a Python file no class needs. Each is kept
    # (stamped with --keep-bytes, with a note naming it), never dropped without a word.
    def with_records(path, added):
        with zipfile.ZipFile(src) as z_in, zipfile.ZipFile(path, "w") as z_out:
            top = z_in.namelist()[0].split("/", 1)[0]
            for i in z_in.infolist():
                z_out.writestr(i, z_in.read(i))
            for name, data in added.items():
                z_out.writestr(top + "/" + name, data)

    for added, note in (({"data/provenance.json": b'{"dataset": "x"}', "code/README.txt": b"notes",
                          "constants/calib.bin": b"\x01\x02\x03"}, b"re-save does not write (data/provenance.json"),
                        ({"code/__torch__/unused_helper.py": b"def helper(x: int) -> int:\n  return x\n"},
                         b"re-save lacks records the archive has (code/__torch__/unused_helper.py")):
        path = os.path.join(work, "foreign.pt")
        with_records(path, added)
        result = run("stamp", path, "--no-git")
        expect(result.returncode == 0 and note in result.stdout + result.stderr,
               f"stamp of an archive with {sorted(added)}: exit {result.returncode}: {result.stdout} {result.stderr}")
        after = contents(path)
        for name, data in added.items():
            expect(after.get(name) == data, f"stamp dropped or changed {name}")
        expect(stamp_of(path) != "", "the stamp reads back")

    for name, code in (("state_dict.pth", 3), ("model.onnx", 3), ("hostile/not_zip.pt", 3), ("hostile/truncated.pt", 3)):
        path = os.path.join(work, os.path.basename(name))
        shutil.copy(os.path.join(TESTDATA, name), path)
        keep = open(path, "rb").read()
        for cmd in (["stamp", path], ["stamp", "--keep-bytes", path], ["verify", path]):
            result = run(*cmd)
            if cmd[0] == "verify" and name == "state_dict.pth":
                # verify judges a torch.save file by what loading it would run: a state dict is safe.
                expect(result.returncode == 0 and result.stderr == b"" and b"safe to load" in result.stdout,
                       f"verify {name}: exit {result.returncode}: {result.stdout} {result.stderr}")
                continue
            expect(result.returncode == code and result.stderr.count(b"\n") == 1,
                   f"{' '.join(cmd[:-1])} {name}: exit {result.returncode}: {result.stderr}")
        expect(open(path, "rb").read() == keep, f"stamp changed {name}")
finally:
    shutil.rmtree(work)

print(f"random flips: {counts['flips']} tried, {counts['flips_passed_unchanged']} passed (records unchanged)")
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok: stamps read back by PyTorch, tampering and damage named every time")
