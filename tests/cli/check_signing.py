#!/usr/bin/python3
"""`tsarchive sign` and `verify --key|--certificate-chain` against OpenSSF's
model_signing, both ways, and the tamper matrix.

Run by CTest:

    python3 tests/cli/check_signing.py TSARCHIVE TESTDATA_DIR VENV_DIR

model_signing (1.1.x, with pyOpenSSL, which its certificate method imports
and 1.1.1 does not declare) is pip-installed into VENV_DIR the first time. A
failed install FAILS the test (exit 1): PyPI is reachable in CI, and a
skipped interop test would let the formats drift apart unseen.

Keys, a root CA, an intermediate and signing certificates are made here with
`openssl` in a temporary folder; no private key is committed. Checks:
- interop: tsarchive signs (key P-256/P-384/P-521, an encrypted key, a
  certificate with an intermediate) a file and a directory, and
  `python -m model_signing verify key|certificate` accepts; model_signing signs
  (key, certificate) and `tsarchive verify` accepts, naming the signer;
- the tamper matrix: each case exits 1 (the model changed under a valid
  signature) or 7 (the signature is invalid or its signer not trusted) with one
  error line that names the file and the reason;
- hostile bundles (deep JSON, a 1 GiB file, invalid UTF-8) are refused in
  bounded time; no private key's text appears in any output;
- embedded signatures (sign --embed, stamp --sign-key): verify finds them,
  inspect names the signer, a detached --signature wins, model_signing
  verifies the bundle over the archive's records unzipped, edits say the
  signature no longer covers the archive, and tampering (a record changed,
  added, removed, renamed; the statement edited; a file's signature planted)
  exits 7 naming the record (a broken CRC: 3).
"""

import base64
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

TSARCHIVE, TESTDATA, VENV = (os.path.abspath(p) for p in sys.argv[1:4])
REQUIREMENTS = ["model_signing>=1.1,<1.2", "pyopenssl"]
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def venv_python():
    os.makedirs(os.path.dirname(os.path.abspath(VENV)), exist_ok=True)
    python = os.path.join(VENV, "bin", "python")
    with open(VENV + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(python) and subprocess.run([python, "-c", "import model_signing, OpenSSL"],
                                                     capture_output=True).returncode == 0:
            return python
        if not os.path.exists(python):
            made = subprocess.run([sys.executable, "-m", "venv", VENV])
            if made.returncode != 0:
                print(f"FAIL: cannot make a venv at {VENV} (python3-venv missing?)")
                sys.exit(1)
        installed = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *REQUIREMENTS])
        if installed.returncode != 0:
            # As tests/pytorch/harness.py: a machine without PyPI skips; CI sets TSARCHIVE_PIP_REQUIRED.
            why = f"pip could not install {' '.join(REQUIREMENTS)} into {VENV} (no network?): the interop test needs it"
            if os.environ.get("TSARCHIVE_PIP_REQUIRED"):
                print(f"FAIL: {why}; TSARCHIVE_PIP_REQUIRED is set")
                sys.exit(1)
            print(f"SKIP: {why}")
            sys.exit(77)
    return python


PY = venv_python()
version = subprocess.run([PY, "-c", "import importlib.metadata as m; print(m.version('model_signing'))"],
                         capture_output=True, text=True).stdout.strip()
print(f"model_signing {version} from {VENV}")

tmp = tempfile.mkdtemp(prefix="tsarchive-signing-")
os.chdir(tmp)
secrets = []  # every private key's base64 body, which no output may contain


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, **kw)


def openssl(*args):
    r = run("openssl", *args)
    if r.returncode != 0:
        print("openssl", " ".join(args), "failed:", r.stderr)
        sys.exit(1)


def ec_key(name, curve):
    openssl("ecparam", "-name", curve, "-genkey", "-noout", "-out", name + ".key")
    openssl("ec", "-in", name + ".key", "-pubout", "-out", name + ".pub")
    body = "".join(l for l in open(name + ".key").read().splitlines() if not l.startswith("-----"))
    secrets.append(body)
    secrets.append(body[10:50])


def ext_file(name, text):
    with open(name, "w") as f:
        f.write(text)
    return name


for name, curve in [("p256", "prime256v1"), ("p384", "secp384r1"), ("p521", "secp521r1"), ("other", "prime256v1"),
                    ("k1", "secp256k1"), ("ca", "prime256v1"), ("inter", "prime256v1"), ("leaf", "prime256v1"),
                    ("ca2", "prime256v1")]:
    ec_key(name, curve)
openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.key")
with open("password.txt", "w") as f:
    f.write("correct horse\n")
openssl("pkcs8", "-topk8", "-in", "p256.key", "-out", "p256.enc.key", "-passout", "pass:correct horse")

ca_ext = ext_file("ca.ext", "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
leaf_ext = ext_file("leaf.ext", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                                "extendedKeyUsage=codeSigning\n")
nosign_ext = ext_file("nosign.ext", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,keyEncipherment\n")
openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=Test Root CA/O=tsarchive tests", "-days", "30",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-out", "ca.pem")
openssl("req", "-x509", "-new", "-key", "ca2.key", "-subj", "/CN=Other Root CA", "-days", "30",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-out", "ca2.pem")


def issue(key, subject, ca_cert, ca_key, ext, out, days="30"):
    openssl("req", "-new", "-key", key, "-subj", subject, "-out", out + ".csr")
    openssl("x509", "-req", "-in", out + ".csr", "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial", "-days", days,
            "-extfile", ext, "-out", out)


issue("inter.key", "/CN=Test Intermediate CA", "ca.pem", "ca.key", ca_ext, "inter.pem")
issue("leaf.key", "/CN=ci-signer/O=tsarchive tests", "inter.pem", "inter.key", leaf_ext, "leaf.pem")
issue("leaf.key", "/CN=expired-signer", "inter.pem", "inter.key", leaf_ext, "expired.pem", days="-1")
issue("leaf.key", "/CN=no-signing-usage", "inter.pem", "inter.key", nosign_ext, "nosign.pem")
encsign_ext = ext_file("encsign.ext", "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,keyEncipherment\n"
                                      "extendedKeyUsage=codeSigning\n")
issue("leaf.key", "/CN=encipher-only", "inter.pem", "inter.key", encsign_ext, "encsign.pem")

# The models: an archive PyTorch wrote (one file) and a directory of several files.
shutil.copy(os.path.join(TESTDATA, "mlp_scripted.pt"), "model.pt")


def make_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.join(path, "sub", "deeper"))
    with open(os.path.join(path, "weights.bin"), "wb") as f:
        # Random bytes behind a NUL, which no pickle starts with: with os.urandom alone, one run in
        # thousands began 80 0N (a pickle's PROTO) and the blob was judged as a pickle.
        f.write(b"\0" + os.urandom(300_000))
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write('{"layers": 3}\n')
    with open(os.path.join(path, "sub", "tokenizer.txt"), "w") as f:
        f.write("a b c\n")
    with open(os.path.join(path, "sub", "deeper", "x.y"), "w") as f:
        f.write("x\n")
    with open(os.path.join(path, ".gitignore"), "w") as f:
        f.write("*.tmp\n")


make_dir("modeldir")


def ts(*args):
    return run(TSARCHIVE, *args)


def ms(*args):
    return run(PY, "-m", "model_signing", *args)


def no_secrets(r, what):
    text = r.stdout + r.stderr
    check(not any(s and s in text for s in secrets), f"{what}: a private key's text appears in the output")


def expect(r, code, what, needles=()):
    no_secrets(r, what)
    ok = r.returncode == code
    check(ok, f"{what}: exit {r.returncode}, expected {code}\n  stdout: {r.stdout[-800:]}\n  stderr: {r.stderr[-800:]}")
    if code not in (0,):
        errors = [l for l in r.stderr.splitlines() if l.startswith("tsarchive: error:")]
        check(len(errors) == 1, f"{what}: {len(errors)} error lines, expected one: {r.stderr!r}")
    for n in needles:
        check(n in r.stdout + r.stderr, f"{what}: {n!r} not in the output: {r.stdout[-600:]} {r.stderr[-600:]}")
    return r


# --- tsarchive signs, model_signing verifies ---------------------------------------------------------------------
for key in ["p256", "p384", "p521"]:
    r = expect(ts("sign", "model.pt", "--key", key + ".key", "-o", f"model.{key}.sig"), 0, f"sign file {key}",
               ["signature written to model.p", "beside the model"])
    expect(ms("verify", "key", "--signature", f"model.{key}.sig", "--public_key", key + ".pub", "model.pt"), 0,
           f"model_signing verify key of tsarchive's {key} file signature")
    expect(ts("verify", "model.pt", "--key", key + ".pub", "--signature", f"model.{key}.sig"), 0,
           f"tsarchive verify of its own {key} signature")

r = expect(ts("sign", "modeldir", "--key", "p256.key"), 0, "sign directory",
           ["modeldir/model.sig", "inside the model directory"])
check(os.path.exists("modeldir/model.sig"), "sign of a directory writes MODEL/model.sig")
expect(ms("verify", "key", "--signature", "modeldir/model.sig", "--public_key", "p256.pub", "modeldir"), 0,
       "model_signing verify key of tsarchive's directory signature")
expect(ts("verify", "modeldir", "--key", "p256.pub"), 0, "tsarchive verify of a directory (default signature)",
       ["intact", "sha256:"])
payload = json.loads(base64.b64decode(json.load(open("modeldir/model.sig"))["dsseEnvelope"]["payload"]))
names = [x["name"] for x in payload["predicate"]["resources"]]
check(names == ["config.json", "sub/deeper/x.y", "sub/tokenizer.txt", "weights.bin"], f"signed names: {names}")
check("model.sig" in payload["predicate"]["serialization"]["ignore_paths"], "model.sig recorded as ignored")

expect(ts("sign", "model.pt", "--key", "p256.enc.key", "--key-password-file", "password.txt", "-o", "enc.sig"), 0,
       "sign with an encrypted key")
expect(ms("verify", "key", "--signature", "enc.sig", "--public_key", "p256.pub", "model.pt"), 0,
       "model_signing verifies the encrypted key's signature")
expect(ts("sign", "model.pt", "--key", "p256.enc.key", "-o", "x.sig"), 2, "encrypted key without a password",
       ["--key-password-file"])

for model, sig in [("model.pt", "cert.sig"), ("modeldir", "modeldir/model.sig")]:
    expect(ts("sign", model, "--key", "leaf.key", "--certificate", "leaf.pem", "--certificate-chain", "inter.pem",
              "-o", sig), 0, f"sign {model} with a certificate", ["CN=ci-signer"])
    expect(ms("verify", "certificate", "--signature", sig, "--certificate_chain", "ca.pem", model), 0,
           f"model_signing verify certificate of tsarchive's {model} signature")
    expect(ts("verify", model, "--certificate-chain", "ca.pem", "--signature", sig), 0,
           f"tsarchive verify certificate {model}", ["CN=ci-signer", "issued by CN=Test Intermediate CA"])

# --- model_signing signs, tsarchive verifies ----------------------------------------------------------------------
make_dir("msdir")
for model, sig in [("model.pt", "ms-file.sig"), ("msdir", "msdir/model.sig")]:
    expect(ms("sign", "key", "--private_key", "p384.key", "--signature", sig, model), 0, f"model_signing sign key {model}")
    r = expect(ts("verify", model, "--key", "p384.pub", "--signature", sig), 0, f"tsarchive verifies model_signing's key signature of {model}")
    fingerprint = hashlib.sha256(open("p384.pub", "rb").read()).hexdigest()
    check(fingerprint in r.stdout, f"verify names the key's fingerprint {fingerprint}: {r.stdout}")
    msig = sig.replace(".sig", ".cert.sig") if model == "model.pt" else "msdir/model.sig"
    expect(ms("sign", "certificate", "--private_key", "leaf.key", "--signing_certificate", "leaf.pem",
              "--certificate_chain", "inter.pem", "--signature", msig, model), 0, f"model_signing sign certificate {model}")
    expect(ts("verify", model, "--certificate-chain", "ca.pem", "--signature", msig), 0,
           f"tsarchive verifies model_signing's certificate signature of {model}", ["CN=ci-signer"])
# model_signing's own default: model.sig in the current folder, over a directory named by path.
expect(ms("sign", "key", "--private_key", "p256.key", "msdir"), 0, "model_signing sign with its default signature path")
expect(ts("verify", "msdir", "--key", "p256.pub", "--signature", "model.sig"), 0, "tsarchive verify, signature outside")

# --- the tamper matrix --------------------------------------------------------------------------------------------
make_dir("t")
expect(ts("sign", "t", "--key", "p256.key"), 0, "sign t")
original = {p: open(os.path.join("t", p), "rb").read() for p in ["weights.bin", "config.json", "sub/tokenizer.txt"]}
for name, data in original.items():
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 1
    open(os.path.join("t", name), "wb").write(flipped)
    expect(ts("verify", "t", "--key", "p256.pub"), 1, f"flipped byte in {name}", [f"'{name}' changed"])
    open(os.path.join("t", name), "wb").write(data)
expect(ts("verify", "t", "--key", "p256.pub"), 0, "t restored")
open("t/extra.bin", "w").write("unsigned")
expect(ts("verify", "t", "--key", "p256.pub"), 1, "file added", ["'extra.bin' added"])
expect(ts("verify", "t", "--key", "p256.pub", "--ignore-paths", "extra.bin"), 0, "file added, --ignore-paths")
expect(ts("verify", "t", "--key", "p256.pub", "--ignore-paths", "t/extra.bin"), 0,
       "file added, --ignore-paths from the current directory (as sign and model_signing take it)")
expect(ms("verify", "key", "--signature", "t/model.sig", "--public_key", "p256.pub", "--ignore-paths", "t/extra.bin", "t"),
       0, "model_signing takes the same --ignore-paths")
os.remove("t/extra.bin")
os.rename("t/config.json", "t/config2.json")
expect(ts("verify", "t", "--key", "p256.pub"), 1, "file renamed", ["'config.json' missing"])
os.rename("t/config2.json", "t/config.json")
os.remove("t/sub/deeper/x.y")
expect(ts("verify", "t", "--key", "p256.pub"), 1, "file removed", ["'sub/deeper/x.y' missing"])
open("t/sub/deeper/x.y", "w").write("x\n")

# The archive: a flipped byte in a record (damage: CRC, exit 3) or a re-zipped record renamed (exit 1).
expect(ts("sign", "model.pt", "--key", "p256.key"), 0, "sign model.pt")
data = open("model.pt", "rb").read()
bad = bytearray(data)
bad[len(bad) // 3] ^= 1
open("flipped.pt", "wb").write(bad)
r = ts("verify", "flipped.pt", "--key", "p256.pub", "--signature", "model.pt.sig")
expect(r, r.returncode if r.returncode in (1, 3) else 1, "flipped byte in the archive")
check(r.returncode in (1, 3), f"flipped archive: exit {r.returncode}")
renamed = data.replace(b"data.pkl", b"data.pkz")
open("renamed.pt", "wb").write(renamed)
r = ts("verify", "renamed.pt", "--key", "p256.pub", "--signature", "model.pt.sig")
check(r.returncode in (1, 3), f"record renamed: exit {r.returncode}: {r.stderr}")
# An intact archive that is not the one signed: the first line leads with the failed signature.
shutil.copy("model.pt", "edited.pt")
expect(ts("extra", "set", "edited.pt", "note.txt=hello"), 0, "extra set on a copy of the signed archive")
r = expect(ts("verify", "edited.pt", "--key", "p256.pub", "--signature", "model.pt.sig"), 1,
           "an intact archive that differs from its detached signature", ["differs from what was signed"])
check(r.stdout.splitlines()[0] == "edited.pt: SIGNATURE FAILS; the records are intact",
      f"the first line does not vouch for an archive whose signature fails: {r.stdout}")

bundle = json.load(open("t/model.sig"))
stmt = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))


def write_bundle(path, statement=None, sig=None, material=None):
    b = json.loads(json.dumps(bundle))
    if statement is not None:
        b["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    if sig is not None:
        b["dsseEnvelope"]["signatures"][0]["sig"] = sig
    if material is not None:
        b["verificationMaterial"] = material
    json.dump(b, open(path, "w"))


edited = json.loads(json.dumps(stmt))
edited["predicate"]["resources"][0]["digest"] = "0" * 64
write_bundle("edited.sig", edited)
expect(ts("verify", "t", "--key", "p256.pub", "--signature", "edited.sig"), 7, "statement edited, signature kept",
       ["does not verify"])
expect(ts("verify", "t", "--key", "other.pub"), 7, "wrong key", ["another key"])
expect(ts("verify", "t", "--key", "k1.pub"), 2, "verify with a secp256k1 key", ["unsupported key", "P-256, P-384 or P-521"])
expect(ts("sign", "t", "--key", "k1.key", "-o", "k1.sig"), 2, "sign with a secp256k1 key", ["P-256, P-384 or P-521"])
expect(ts("sign", "t", "--key", "rsa.key", "-o", "rsa.sig"), 2, "sign with an RSA key", ["an RSA key", "P-256"])
# A signing certificate that holds an RSA key is the signer's own mistake: exit 2, as the key is (review 56b).
openssl("req", "-x509", "-new", "-key", "rsa.key", "-subj", "/CN=rsa-signer", "-days", "2", "-out", "rsa.crt")
expect(ts("sign", "t", "--key", "p256.key", "--certificate", "rsa.crt", "-o", "rsa-cert.sig"), 2,
       "sign with a certificate holding an RSA key", ["an RSA key", "P-256"])
make_dir("u")
expect(ts("sign", "u", "--key", "p256.key"), 0, "sign u")
r = expect(ts("verify", "t", "--key", "p256.pub", "--signature", "u/model.sig"), 1, "another model's signature",
           ["'weights.bin' changed"])
expect(ts("verify", "model.pt", "--key", "p256.pub", "--signature", "u/model.sig"), 7,
       "a directory's signature on a file", ["another model"])
# Certificates.
expect(ts("sign", "t", "--key", "leaf.key", "--certificate", "expired.pem", "--certificate-chain", "inter.pem",
          "-o", "expired.sig"), 2, "sign with an expired certificate", ["has expired", "valid now"])
check(not os.path.exists("expired.sig"), "no signature made with an expired certificate")
# The same signature with the expired certificate for its key in place of the valid one (the certificates
# are outside what the signature signs): verify refuses it for the certificate's dates.
expect(ts("sign", "t", "--key", "leaf.key", "--certificate", "leaf.pem", "--certificate-chain", "inter.pem",
          "-o", "expired.sig"), 0, "sign with the leaf, to swap its certificate")


def swap_certificate(sig, pem):
    """The signer's certificate in `sig` replaced by `pem`'s (for the same key): outside what is signed."""
    openssl("x509", "-in", pem, "-outform", "DER", "-out", pem + ".der")
    with open(sig) as f:
        swapped = json.load(f)
    with open(pem + ".der", "rb") as f:
        swapped["verificationMaterial"]["x509CertificateChain"]["certificates"][0]["rawBytes"] = \
            base64.b64encode(f.read()).decode()
    with open(sig, "w") as f:
        json.dump(swapped, f)


swap_certificate("expired.sig", "expired.pem")
expect(ts("verify", "t", "--certificate-chain", "ca.pem", "--signature", "expired.sig"), 7, "expired certificate",
       ["expired"])
expect(ts("verify", "t", "--certificate-chain", "ca2.pem", "--signature", "t/model.sig"), 7,
       "key signature checked as a certificate", ["made with a key"])
expect(ts("sign", "t", "--key", "leaf.key", "--certificate", "leaf.pem", "--certificate-chain", "inter.pem",
          "-o", "leaf.sig"), 0, "sign with the leaf")
expect(ts("verify", "t", "--certificate-chain", "ca2.pem", "--signature", "leaf.sig"), 7, "untrusted root",
       ["not trusted"])
expect(ts("sign", "t", "--key", "leaf.key", "--certificate", "leaf.pem", "-o", "nochain.sig"), 0, "sign, no chain")
expect(ts("verify", "t", "--certificate-chain", "ca.pem", "--signature", "nochain.sig"), 7,
       "chain that does not reach the root", ["not trusted"])
# RFC 5280: each usage extension present restricts the key. keyEncipherment alone, with or without an extended
# key usage of codeSigning (which model_signing 1.1.1 accepts), does not sign: sign refuses, and verify refuses
# a signature whose certificate was swapped for it.
for cert in ["nosign.pem", "encsign.pem"]:
    expect(ts("sign", "t", "--key", "leaf.key", "--certificate", cert, "--certificate-chain", "inter.pem",
              "-o", "nosign.sig"), 2, f"sign with {cert}, whose key usage forbids signing",
           ["may not sign: its key usage does not include digitalSignature"])
    check(not os.path.exists("nosign.sig"), f"no signature made with {cert}")
    shutil.copy("leaf.sig", "nosign.sig")
    swap_certificate("nosign.sig", cert)
    expect(ts("verify", "t", "--certificate-chain", "ca.pem", "--signature", "nosign.sig"), 7,
           f"verify a signature whose certificate is {cert}", ["may not sign: its key usage does not include digitalSignature"])
    os.remove("nosign.sig")
expect(ts("sign", "t", "--key", "p256.key", "--certificate", "leaf.pem", "-o", "mismatch.sig"), 2,
       "certificate for another key", ["not for this private key"])


# Statements a trusted key signed that name bad files: signed here with the
# venv's cryptography (model_signing's own library), as a hostile signer would.
def sign_statement(statement, key="p256.key"):
    script = """
import base64, json, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
payload = sys.stdin.buffer.read()
t = b"application/vnd.in-toto+json"
pae = b"DSSEv1 %d %s %d " % (len(t), t, len(payload)) + payload
print(base64.b64encode(key.sign(pae, ec.ECDSA(hashes.SHA256()))).decode())
"""
    payload = json.dumps(statement).encode()
    sig = subprocess.run([PY, "-c", script, key], input=payload, capture_output=True).stdout.decode().strip()
    b = json.loads(json.dumps(bundle))
    b["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    b["dsseEnvelope"]["signatures"][0]["sig"] = sig
    return b


def with_resources(resources):
    s = json.loads(json.dumps(stmt))
    s["predicate"]["resources"] = resources
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in resources)).hexdigest()
    s["subject"][0]["digest"]["sha256"] = root
    return s


good = stmt["predicate"]["resources"]
resigned = sign_statement(stmt)
json.dump(resigned, open("resigned.sig", "w"))
expect(ts("verify", "t", "--key", "p256.pub", "--signature", "resigned.sig"), 0, "a statement re-signed here verifies")
for what, resources, needle in [
        ("duplicate names", good + [good[0]], "twice"),
        ("a '..' name", good + [dict(good[0], name="../outside")], "'..'"),
        ("a name in a '..' folder", good + [dict(good[0], name="sub/../../etc/passwd")], "'..'"),
        ("an absolute name", good + [dict(good[0], name="/etc/passwd")], "absolute"),
        ("an empty component", good + [dict(good[0], name="sub//x")], "empty path component")]:
    json.dump(sign_statement(with_resources(resources)), open("hostile.sig", "w"))
    expect(ts("verify", "t", "--key", "p256.pub", "--signature", "hostile.sig"), 7, f"signed statement with {what}",
           [needle])
s = with_resources(good)
s["subject"][0]["digest"]["sha256"] = "1" * 64
json.dump(sign_statement(s), open("hostile.sig", "w"))
expect(ts("verify", "t", "--key", "p256.pub", "--signature", "hostile.sig"), 7, "root digest that does not match",
       ["root digest"])

# A directory's signature file that is a symbolic link to a file a loader reads (which holds the bundle; members
# of the attacker's choosing are refused below): refused by both tools, never "that file is the signature".
make_dir("sl")
expect(ts("sign", "sl", "--key", "p256.key"), 0, "sign sl")
os.rename("sl/model.sig", "sl/generation_config.json")
os.symlink("generation_config.json", "sl/model.sig")
expect(ts("verify", "sl", "--key", "p256.pub"), 7, "a signature file that is a symbolic link",
       ["the signature file 'model.sig' inside the model is a symbolic link"])
check(ms("verify", "key", "--signature", "sl/model.sig", "--public_key", "p256.pub", "sl").returncode != 0,
      "model_signing refuses a signature file that is a symbolic link")
expect(ts("sign", "sl", "--key", "p256.key"), 2, "sign will not write a signature through a link", ["symbolic link"])

# Members outside the Sigstore bundle format: refused, naming the member and where, as model_signing refuses them.
for where, needle in [((), 'the bundle has the member "auto_map"'),
                      (("verificationMaterial",), 'verificationMaterial has the member "auto_map"'),
                      (("dsseEnvelope",), 'the DSSE envelope has the member "auto_map"'),
                      (("dsseEnvelope", "signatures", 0), 'the DSSE signature has the member "auto_map"')]:
    b = json.loads(json.dumps(bundle))
    node = b
    for key in where:
        node = node[key]
    node["auto_map"] = {"AutoModel": "m.M"}
    json.dump(b, open("members.sig", "w"))
    expect(ts("verify", "t", "--key", "p256.pub", "--signature", "members.sig"), 7, f"a member in {where or 'the bundle'}",
           [needle])
    check(ms("verify", "key", "--signature", "members.sig", "--public_key", "p256.pub", "t").returncode != 0,
          f"model_signing refuses a member in {where or 'the bundle'}")

# Hostile bundles: bounded, one line, exit 7.
with open("deep.sig", "w") as f:
    f.write("[" * 100000 + "]" * 100000)
with open("big.sig", "wb") as f:
    f.truncate(1 << 30)
with open("utf8.sig", "wb") as f:
    f.write(b'{"mediaType": "\xff\xfe", "x": 1}')
b = json.loads(json.dumps(bundle))
b["dsseEnvelope"]["payload"] = "!!notbase64"
json.dump(b, open("b64.sig", "w"))
for name, needle in [("deep.sig", "nested deeper"), ("big.sig", "larger than 64 MiB"), ("utf8.sig", "not valid JSON"),
                     ("b64.sig", "not base64")]:
    start = time.monotonic()
    expect(ts("verify", "t", "--key", "p256.pub", "--signature", name), 7, f"hostile bundle {name}", [needle])
    check(time.monotonic() - start < 10, f"hostile bundle {name} took {time.monotonic() - start:.1f} s")

# Usage and secrets: a private key where a public one goes, a key as the signature.
expect(ts("verify", "t", "--key", "p256.key"), 2, "private key given as --key of verify", ["not a PEM public key"])
expect(ts("verify", "t", "--key", "p256.pub", "--signature", "p256.key"), 7, "a private key as the signature")
expect(ts("verify", "model.pt", "--key", "p256.pub", "--signature", "nothere.sig"), 4, "missing signature file")
os.remove("model.pt.sig")
# A signer named and no signature: fail closed (a deleted signature must not pass a gate).
expect(ts("verify", "model.pt", "--key", "p256.pub"), 7, "unsigned with a key", ["not signed", "model.pt.sig"])
expect(ts("verify", "model.pt", "--key", "p256.pub", "--require-signature"), 7, "--require-signature", ["not signed"])
r = expect(ts("verify", "model.pt", "--key", "p256.pub", "--allow-unsigned"), 0, "--allow-unsigned", ["none"])
expect(ts("verify", "model.pt", "--key", "p256.pub", "--allow-unsigned", "--require-signature"), 2,
       "--allow-unsigned with --require-signature")
expect(ts("verify", "model.pt", "--require-signature"), 2, "--require-signature without a key")
expect(ts("verify", "model.pt", "--allow-unsigned"), 2, "--allow-unsigned without a key")
# A pickle signed as it is: the signature is valid, and what loading it would run is still judged.
shutil.copy(os.path.join(TESTDATA, "loadsafety", "evil", "bypass_run.pkl"), "signed_evil.pkl")
# sign checks it first, as verify does: a pickle that runs code is not signed unless asked.
expect(ts("sign", "signed_evil.pkl", "--key", "p256.key"), 8, "sign a pickle that runs code",
       ["will not sign it: it is unsafe to load: dangerous", "--allow-unverified"])
check(not os.path.exists("signed_evil.pkl.sig"), "no signature written for a pickle that runs code")
expect(ts("sign", "signed_evil.pkl", "--key", "p256.key", "--allow-unverified"), 0, "sign it with --allow-unverified")
with zipfile.ZipFile("assets.zip", "w") as z:  # a ZIP PyTorch did not write: signed as bytes
    z.writestr("vocab.txt", "a\nb\n")
expect(ts("sign", "assets.zip", "--key", "p256.key"), 0, "sign a ZIP PyTorch did not write")
expect(ts("verify", "signed_evil.pkl", "--key", "p256.pub"), 8, "a signed pickle that runs code",
       ["signed_evil.pkl: UNSAFE to load (", "valid, signed by", "unsafe to load"])
shutil.copy(os.path.join(TESTDATA, "loadsafety", "benign", "torch2_13", "legacy.pth"), "signed_legacy.pth")
expect(ts("sign", "signed_legacy.pth", "--key", "p256.key"), 0, "sign a legacy torch.save file")
expect(ts("verify", "signed_legacy.pth", "--key", "p256.pub"), 0, "a signed benign legacy file",
       ["signed_legacy.pth: safe to load (legacy torch.save file", "valid, signed by"])
os.makedirs("nonutf8")
with open(b"nonutf8/\xff.bin", "wb") as f:
    f.write(b"x")
expect(ts("sign", "nonutf8", "--key", "p256.key", "-o", "nonutf8.sig"), 3, "a file name that is not UTF-8",
       ["not UTF-8", "--ignore-paths"])
check(not os.path.exists("nonutf8.sig"), "no signature written for a name it cannot hold")
os.symlink("weights.bin", "t/link.bin")
expect(ts("verify", "t", "--key", "p256.pub"), 1, "a symbolic link added to a signed directory: changed",
       ["'link.bin' added (a symbolic link, not signed)"])
expect(ts("sign", "t", "--key", "p256.key", "-o", "l.sig"), 2, "symbolic link refused", ["link.bin", "--allow-symlinks"])
expect(ts("sign", "t", "--key", "p256.key", "-o", "l.sig", "--allow-symlinks"), 0, "--allow-symlinks")
expect(ms("verify", "key", "--signature", "l.sig", "--public_key", "p256.pub", "--allow_symlinks", "t"), 0,
       "model_signing verifies a signature over a symbolic link")

# JSON
r = expect(ts("verify", "t", "--key", "p256.pub", "--signature", "l.sig", "--json"), 0, "verify --json")
doc = json.loads(r.stdout)
check(doc["signature"]["method"] == "key" and doc["signature"]["matches"], f"verify --json: {doc}")

# --- embedded signatures (sign --embed, stamp --sign-key) ----------------------------------------------------------

SIG = "extra/tsarchive/model.sig"
fp256 = hashlib.sha256(open("p256.pub", "rb").read()).hexdigest()


def fresh(name):
    shutil.copy(os.path.join(TESTDATA, "mlp_scripted.pt"), name)
    return name


def rezip(src, dst, change):
    """Rewrites src into dst with Python's zipfile (valid CRCs): change(name, data) -> [(name, data)]."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            for name, data in change(info.filename, zin.read(info)):
                zout.writestr(name, data)


fresh("emb.pt")
expect(ts("extra", "set", "emb.pt", "labels.txt=cat dog"), 0, "an extra file before signing")
r = expect(ts("sign", "emb.pt", "--key", "p256.key", "--embed"), 0, "sign --embed",
           ["signature stored in the archive as " + SIG])
check("replacing" not in r.stdout, f"first embed says nothing of replacing: {r.stdout}")
top = zipfile.ZipFile("emb.pt").namelist()[0].split("/")[0]
names = zipfile.ZipFile("emb.pt").namelist()
check(f"{top}/{SIG}" in names, f"the bundle is the record {top}/{SIG}: {names}")
expect(ts("verify", "emb.pt", "--key", "p256.pub"), 0, "verify finds the embedded signature",
       [SIG + " (embedded): valid", fp256])
expect(ts("verify", "emb.pt", "--key", "p256.pub", "--require-signature"), 0, "--require-signature counts it")
r = expect(ts("verify", "emb.pt", "--key", "p256.pub", "--json"), 0, "verify --json, embedded")
doc = json.loads(r.stdout)
check(doc["signature"]["embedded"] and doc["signature"]["matches"] and doc["signature"]["path"] == SIG,
      f"verify --json names the embedded signature: {doc['signature']}")
expect(ts("verify", "emb.pt", "--key", "other.pub"), 7, "embedded, wrong key", ["another key", SIG])
# The same records behind one byte (zipfile writes offsets from the file's start, so loaders read the ZIP):
# not an archive verify reads, so its embedded signature vouches for nothing.
with zipfile.ZipFile("emb.pt") as src, open("emb_prefixed.pt", "wb") as f:
    f.write(b"#")
    with zipfile.ZipFile(f, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info.filename))
expect(ts("verify", "emb_prefixed.pt", "--key", "p256.pub"), 7, "an embedded signature behind a prefix",
       ["not signed"])
expect(ts("verify", "emb.pt"), 0, "verify without a key: intact, the signature not checked",
       ["(embedded): not checked"])
r = expect(ts("inspect", "emb.pt"), 0, "inspect shows the embedded signature", ["key sha256:" + fp256, "unverified"])
r = expect(ts("inspect", "emb.pt", "--json"), 0, "inspect --json")
isig = json.loads(r.stdout)["signature"]
check(isig["record"] == SIG and isig["verified"] is False and isig["method"] == "key" and isig["key_sha256"] == fp256,
      f"inspect --json signature: {isig}")
r = expect(ts("inspect", os.path.join(TESTDATA, "mlp_scripted.pt"), "--json"), 0, "inspect --json, unsigned")
check(json.loads(r.stdout)["signature"] is None, "inspect --json: signature null without one")
r = expect(ts("sign", "emb.pt", "--key", "p384.key", "--embed"), 0, "re-sign replaces", ["replacing the previous"])
expect(ts("verify", "emb.pt", "--key", "p384.pub"), 0, "the re-signed archive verifies with the new key")
expect(ts("verify", "emb.pt", "--key", "p256.pub"), 7, "and not with the old one", ["another key"])
check(zipfile.ZipFile("emb.pt").namelist().count(f"{top}/{SIG}") == 1, "one embedded signature after re-signing")

# The statement: the records by name, the signature left out, model_signing's v1.0 predicate.
bundle_e = json.loads(ts("extra", "get", "emb.pt", "tsarchive/model.sig").stdout)
stmt_e = json.loads(base64.b64decode(bundle_e["dsseEnvelope"]["payload"]))
listed = sorted(x["name"] for x in stmt_e["predicate"]["resources"])
records = sorted(n[len(top) + 1:] for n in zipfile.ZipFile("emb.pt").namelist() if not n.endswith("/"))
check(listed == sorted(set(records) - {SIG}), f"the statement lists every other record: {listed} vs {records}")
check(stmt_e["predicate"]["serialization"]["ignore_paths"] == [SIG] and stmt_e["subject"][0]["name"] == top,
      f"the statement's ignore_paths and subject: {stmt_e['predicate']['serialization']} {stmt_e['subject']}")

# model_signing verifies the embedded bundle over the records unzipped into a folder.
shutil.rmtree("unzipped", ignore_errors=True)
zipfile.ZipFile("emb.pt").extractall("unzipped")
expect(ms("verify", "key", "--signature", os.path.join("unzipped", top, SIG), "--public_key", "p384.pub",
          os.path.join("unzipped", top)), 0, "model_signing verify key of the embedded bundle over the unzipped records")

# Certificates, embedded.
fresh("embc.pt")
expect(ts("sign", "embc.pt", "--key", "leaf.key", "--certificate", "leaf.pem", "--certificate-chain", "inter.pem",
          "--embed"), 0, "sign --embed with a certificate")
expect(ts("verify", "embc.pt", "--certificate-chain", "ca.pem"), 0, "verify embedded certificate signature",
       ["CN=ci-signer", "(embedded)"])
expect(ts("verify", "embc.pt", "--certificate-chain", "ca2.pem"), 7, "embedded certificate, untrusted root",
       ["not trusted"])
expect(ts("inspect", "embc.pt"), 0, "inspect names the certificate", ["CN=ci-signer", "CN=Test Intermediate CA",
                                                                      "unverified"])

# A detached signature given with --signature wins over the embedded one.
expect(ts("sign", "emb.pt", "--key", "p521.key", "-o", "emb.det.sig"), 0, "detached signature of a signed archive")
expect(ts("verify", "emb.pt", "--key", "p521.pub", "--signature", "emb.det.sig"), 0, "--signature wins",
       ["emb.det.sig: valid"])
expect(ms("verify", "key", "--signature", "emb.det.sig", "--public_key", "p521.pub", "emb.pt"), 0,
       "model_signing verifies the detached signature of an archive with an embedded one")

# Tampering: each is exit 7 naming the record (3 for damage).
expect(ts("sign", "emb.pt", "--key", "p256.key", "--embed"), 0, "sign emb.pt again")
signed = open("emb.pt", "rb").read()
data0 = f"{top}/data/0"
with zipfile.ZipFile("emb.pt") as z:
    offset = z.getinfo(data0).header_offset
    local = signed[offset:offset + 30]
    start = offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
bad = bytearray(signed)
bad[start] ^= 1
open("t-flip.pt", "wb").write(bad)
expect(ts("verify", "t-flip.pt", "--key", "p256.pub"), 3, "flipped byte in a record: damage", ["data/0"])


def flip_record(name, data):
    if name == data0:
        data = bytes([data[0] ^ 1]) + data[1:]
    return [(name, data)]


rezip("emb.pt", "t-changed.pt", flip_record)
r = expect(ts("verify", "t-changed.pt", "--key", "p256.pub"), 7, "a record changed (CRC valid)",
           ["does not cover", "'data/0' changed"])
check(r.stdout.splitlines()[0].startswith("t-changed.pt: SIGNATURE FAILS; the records are intact"),
      f"the first line does not vouch for an archive whose embedded signature fails: {r.stdout}")
rezip("emb.pt", "t-added.pt", lambda n, d: [(n, d)] + ([(f"{top}/extra/added.txt", b"x")] if n == data0 else []))
expect(ts("verify", "t-added.pt", "--key", "p256.pub"), 7, "a record added", ["'extra/added.txt' added"])
rezip("emb.pt", "t-removed.pt", lambda n, d: [] if n.endswith("extra/labels.txt") else [(n, d)])
expect(ts("verify", "t-removed.pt", "--key", "p256.pub"), 7, "a record removed", ["'extra/labels.txt' missing"])
rezip("emb.pt", "t-renamed.pt", lambda n, d: [(n.replace("labels.txt", "labelz.txt"), d)])
expect(ts("verify", "t-renamed.pt", "--key", "p256.pub"), 7, "a record renamed", ["'extra/labels.txt' missing"])
bundle_e = json.loads(ts("extra", "get", "emb.pt", "tsarchive/model.sig").stdout)
stmt_e = json.loads(base64.b64decode(bundle_e["dsseEnvelope"]["payload"]))
edited_e = json.loads(json.dumps(stmt_e))
edited_e["predicate"]["resources"][0]["digest"] = "0" * 64
bundle_bad = json.loads(json.dumps(bundle_e))
bundle_bad["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(edited_e).encode()).decode()
json.dump(bundle_bad, open("edited-embedded.sig", "w"))
shutil.copy("emb.pt", "t-stmt.pt")
expect(ts("extra", "set", "t-stmt.pt", "tsarchive/model.sig=@edited-embedded.sig"), 0, "plant an edited statement")
expect(ts("verify", "t-stmt.pt", "--key", "p256.pub"), 7, "the embedded statement edited", ["does not verify"])
shutil.copy("emb.pt", "t-file.pt")
expect(ts("sign", "model.pt", "--key", "p256.key", "-o", "file.sig"), 0, "a file's detached signature")
expect(ts("extra", "set", "t-file.pt", "tsarchive/model.sig=@file.sig"), 0, "a file's signature planted as embedded")
expect(ts("verify", "t-file.pt", "--key", "p256.pub"), 7, "a file's signature embedded", ["not of the archive's records"])

# A signed archive crafted so that PyTorch reads another data/0 (a duplicate entry placed first): verify --key
# answers as verify does without a key (the structural refusal, naming the entry), not "not signed".
rezip("emb.pt", "t-dup.pt", lambda n, d: [(n, b"\0" * len(d)), (n, d)] if n == data0 else [(n, d)])
plain = ts("verify", "t-dup.pt")
keyed = expect(ts("verify", "t-dup.pt", "--key", "p256.pub"), plain.returncode,
               "a crafted archive with an embedded signature: as without a key", ["data/0"])
check(plain.returncode in (3, 8) and "not signed" not in keyed.stderr,
      f"a crafted archive's refusal comes first: exit {plain.returncode}, {keyed.stderr!r}")
check([l for l in keyed.stderr.splitlines() if "error:" in l] == [l for l in plain.stderr.splitlines() if "error:" in l],
      f"the same refusal with a key and without: {keyed.stderr!r} vs {plain.stderr!r}")

# A signature record planted in a torch.save file is no signature: verify's checks there are load safety's.
with zipfile.ZipFile(os.path.join(TESTDATA, "state_dict.pth")) as z:
    sd_top = z.namelist()[0].split("/")[0]
rezip(os.path.join(TESTDATA, "state_dict.pth"), "t-planted.pth",
      lambda n, d: [(n, d)] + ([(f"{sd_top}/{SIG}", json.dumps(bundle_e).encode())] if n.endswith("data.pkl") else []))
expect(ts("verify", "t-planted.pth", "--key", "p256.pub", "--require-signature"), 7,
       "an embedded signature planted in a torch.save file is not taken", ["not signed"])

# Edits say that the signature no longer covers the archive, and keep it.
shutil.copy("emb.pt", "t-edit.pt")
r = expect(ts("extra", "set", "t-edit.pt", "note.txt=hello"), 0, "extra set on a signed archive",
           ["no longer covers t-edit.pt", SIG])
check(sum("no longer covers" in l for l in r.stderr.splitlines()) == 1, f"one line: {r.stderr}")
expect(ts("verify", "t-edit.pt", "--key", "p256.pub"), 7, "verify after extra set", ["'extra/note.txt' added"])
r = expect(ts("extra", "rm", "t-edit.pt", "tsarchive/model.sig"), 0, "extra rm removes the embedded signature")
check("no longer covers" not in r.stderr, f"removing the signature itself prints no note: {r.stderr}")
expect(ts("verify", "t-edit.pt", "--key", "p256.pub"), 7, "unsigned after extra rm", ["not signed"])
expect(ts("verify", "t-edit.pt", "--key", "p256.pub", "--allow-unsigned"), 0, "--allow-unsigned after rm",
       ["signature  none"])

expect(ts("convert", "emb.pt", "--input", "2x8", "-o", "conv.pt"), 0, "convert of a signed archive",
       ["no longer covers conv.pt", "tsarchive/model.sig"])
expect(ts("verify", "conv.pt", "--key", "p256.pub"), 7, "verify of the converted archive", ["does not cover"])

# stamp --sign-key: both in one write, both valid; stamp alone on a signed archive says it breaks the signature.
for how in (["--keep-bytes"], []):
    fresh("st.pt")
    r = expect(ts("stamp", "st.pt", "--sign-key", "p256.key", "--no-host", "--no-git", *how), 0,
               f"stamp --sign-key {how}", ["signed as key sha256:" + fp256])
    r = expect(ts("verify", "st.pt", "--key", "p256.pub", "--require-signature", "--require-stamp"), 0,
               f"stamp and signature both valid after stamp --sign-key {how}", ["intact", "(embedded): valid"])
    r = expect(ts("stamp", "st.pt", "--no-host", "--no-git", *how), 0, f"stamp {how} of a signed archive",
               ["no longer covers st.pt", "the stamp changed"])
    expect(ts("verify", "st.pt", "--key", "p256.pub"), 7, f"verify after stamp {how}",
           ["changed  extra/producer_info.json"])
fresh("st.pt")
before = open("st.pt", "rb").read()
expect(ts("stamp", "st.pt", "--sign-key", "p256.enc.key"), 2, "stamp --sign-key, encrypted key without its password",
       ["--key-password-file"])
check(open("st.pt", "rb").read() == before, "a refused stamp --sign-key leaves the archive as it was")
expect(ts("stamp", "st.pt", "--keep-bytes", "--sign-key", "p256.enc.key", "--key-password-file", "password.txt"), 0,
       "stamp --sign-key with --key-password-file")
expect(ts("stamp", "st.pt", "--key-password-file", "password.txt"), 2, "--key-password-file needs --sign-key")

# Usage: a directory, a file that is not an archive.
expect(ts("sign", "modeldir", "--key", "p256.key", "--embed"), 2, "sign --embed of a directory", ["--embed"])
open("plain.bin", "wb").write(b"not a zip")
expect(ts("sign", "plain.bin", "--key", "p256.key", "--embed"), 3, "sign --embed of a file that is not an archive")

shutil.rmtree(tmp, ignore_errors=True)
print(f"{checks} checks, {len(failures)} failures; model_signing {version}: key and certificate methods, both ways, "
      f"files and directories")
sys.exit(1 if failures else 0)
