#!/usr/bin/python3
"""docs/openapi/serve.yaml describes what `tsarchive serve` serves.

Run by CTest with TSARCHIVE_PYTHON:

    python3 tests/pytorch/check_serve_openapi.py TSARCHIVE TESTDATA_DIR OPENAPI_YAML VENV_DIR

Every endpoint `tsarchive serve --help` names is a path of the document; the
server, on loopback with testdata/mlp_scripted.pt, answers every operation of
the document with a status the document lists for it, its JSON bodies match
the document's schemas (a small validator: $ref, type, required, properties,
items, enum, minimum), an unknown model gets a listed 404 and a wrong method
a listed 405. Then a bounded property run of schemathesis (SCHEMATHESIS below,
pip-installed into VENV_DIR, a venv made with this python's site packages;
TSARCHIVE_SCHEMATHESIS names another schemathesis command) against the
document: 25 examples per operation, fixed seed, every check but
positive_data_acceptance (a schema-valid tensor still has to fit the model),
which must pass: no crash, every status and body as documented. Without
network (pip fails) the checks above still run and the property run is
skipped, said in one line; TSARCHIVE_PIP_REQUIRED (CI) makes that a failure.
PyYAML (python3-yaml) that this python lacks is pip-installed the same way,
and the driver runs itself again under VENV_DIR's python (exit 77, skipped,
when that fails too).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

from harness import check, finish, install_and_rerun, pip_venv

# Pinned, so that a new release cannot change what the run generates.
SCHEMATHESIS = "schemathesis==4.32.5"
TSARCHIVE, TESTDATA, DOC, VENV = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

try:
    import yaml
except ImportError:
    install_and_rerun(VENV, ["PyYAML"])

doc = yaml.safe_load(open(DOC))
paths = doc["paths"]


def deref(node):
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def validate(value, schema, where):
    """Problems of `value` against the document's `schema`, as text."""
    schema = deref(schema)
    problems = []
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}
    if kind in types and (not isinstance(value, types[kind]) or (kind == "integer" and isinstance(value, bool))):
        return [f"{where}: {json.dumps(value)[:60]} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        problems.append(f"{where}: {value} below {schema['minimum']}")
    if kind == "object":
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{where}: no {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                problems += validate(value[key], sub, f"{where}.{key}")
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{where}[{i}]")
    return problems


# Every endpoint the help names is in the document.
help_text = subprocess.run([TSARCHIVE, "serve", "--help"], capture_output=True, text=True).stdout
named = set()
for token in re.findall(r"/(?:v2|metrics)[A-Za-z0-9_/]*", help_text):
    named.add(token.rstrip("/").replace("NAME", "{name}"))
check(len(named) >= 7, f"endpoints named by serve --help: {sorted(named)}")
for path in sorted(named):
    check(path in paths, f"serve --help names {path}, which docs/openapi/serve.yaml does not describe")


def find_schemathesis():
    """TSARCHIVE_SCHEMATHESIS, else SCHEMATHESIS in VENV (pip-installed the
    first time); None when pip cannot install it."""
    if os.environ.get("TSARCHIVE_SCHEMATHESIS"):
        return os.environ["TSARCHIVE_SCHEMATHESIS"]
    python = pip_venv(VENV, [SCHEMATHESIS])
    return os.path.join(os.path.dirname(python), "schemathesis") if python else None


schemathesis = find_schemathesis()
p = subprocess.Popen([TSARCHIVE, "serve", f"{TESTDATA}/mlp_scripted.pt", "--port", "0"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
line = p.stdout.readline()
check(line.startswith("tsarchive serve: http://127.0.0.1:"), f"start line: {line!r}")
threading.Thread(target=lambda: list(p.stderr), daemon=True).start()
base = line.split()[2][: -len("/v2")]


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def check_answer(method, template, operation, status, content_type, text):
    responses = operation["responses"]
    what = f"{method.upper()} {template}"
    check(str(status) in responses, f"{what}: status {status} is not in the document ({sorted(responses)})")
    if str(status) not in responses:
        return
    response = deref(responses[str(status)])
    media = response.get("content", {})
    if "application/json" in content_type:
        check("application/json" in media, f"{what} {status}: JSON that the document does not list")
        if "application/json" in media:
            problems = validate(json.loads(text), media["application/json"]["schema"], what)
            check(not problems, f"{what} {status}: {problems}")
    elif text:
        check(any(content_type.startswith(m) for m in media), f"{what} {status}: {content_type} not in {list(media)}")


infer_body = {"id": "o", "inputs": [{"name": "x", "shape": [2, 8], "datatype": "FP32", "data": [0.5] * 16}],
              "outputs": [{"name": "out"}]}
try:
    operations = 0
    for template, item in paths.items():
        for method in ("get", "post", "put", "delete"):
            if method not in item:
                continue
            operation = item[method]
            operations += 1
            path = template.replace("{name}", "mlp_scripted").replace("{version}", "1")
            body = infer_body if method == "post" else None
            check_answer(method, template, operation, *call(method.upper(), path, body))
            if method == "post":
                status, _, text = call("POST", path, {"inputs": [{"name": "x"}]})
                check(status == 400, f"a bad infer body: {status}")
                check_answer(method, template, operation, status, "application/json", text)
            if "{name}" in template:
                wrong = template.replace("{name}", "nope").replace("{version}", "1")
                check_answer(method, template, operation, *call(method.upper(), wrong, body))
            other = "POST" if method == "get" else "GET"
            check_answer(method, template, operation, *call(other, path, {} if other == "POST" else None))
    check(operations == 10, f"operations in the document: {operations}")

    if schemathesis:
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "schemathesis.toml")
            with open(config, "w") as f:
                f.write('[parameters]\n"path.name" = "mlp_scripted"\n"path.version" = "1"\n')
            run = subprocess.run([schemathesis, "--config-file", config, "run", os.path.abspath(DOC), "--url", base,
                                  "--max-examples", "25", "--seed", "1", "--exclude-checks", "positive_data_acceptance"],
                                 capture_output=True, text=True, timeout=600, cwd=tmp)
            check(run.returncode == 0, f"schemathesis: {run.stdout[-3000:]}{run.stderr[-1000:]}")
            summary = [line for line in run.stdout.splitlines() if "generated" in line]
            property_run = f"schemathesis: {summary[-1].strip() if summary else run.stdout[-200:]}"
            print(property_run)
        check(p.poll() is None, "the server still runs after schemathesis")
    else:
        property_run = f"the schemathesis property run SKIPPED: {SCHEMATHESIS} could not be installed"
        print(f"note: {property_run}")
finally:
    p.terminate()
    p.wait(timeout=30)

finish(f"serve: docs/openapi/serve.yaml names every endpoint of serve --help; {operations} operations answer as documented; "
       f"{property_run}")
