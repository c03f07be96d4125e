#!/usr/bin/python3
"""deploy/kserve/'s manifests, read by KServe's own Python SDK and checked
against the server they run.

    python3 tests/deploy/check_kserve.py TSARCHIVE DEPLOY_DIR TESTDATA_DIR VENV_DIR

KServe's SDK (`kserve` on PyPI, pinned) is pip-installed into VENV_DIR the
first time (harness.pip_venv; without network the test skips, and fails with
TSARCHIVE_PIP_REQUIRED). Only its model classes are needed, so it is
installed without its model-server dependencies (numpy, pandas, grpc,
fastapi), and its package and kubernetes' are entered without running their
__init__, which import those.

1. Each manifest becomes the SDK's V1alpha1ServingRuntime or
   V1beta1InferenceService. The SDK's own deserializer (ApiClient) reads only
   the keys it knows and converts what it can, so a misspelt or mistyped field
   would pass it silently: the walk here follows the SDK's openapi_types and
   attribute_map and refuses any key the model does not have and any value of
   the wrong JSON type, naming where; the core Kubernetes parts (containers,
   probes, volumes) are the kubernetes client's pydantic models, validated
   with extra fields forbidden and strict types. Then the SDK's constructors
   run (their setters check required fields and enums). Misspelt, unknown and
   mistyped fields in both kinds of part must fail (the negative cases).
2. What the manifests name exists: every option of the runtime's args is one
   of `tsarchive serve --help`; the port is the one the image's entrypoint
   listens on and every probe and scrape annotation uses it; the isvc uses the
   runtime, a format and a protocol it declares; terminationGracePeriodSeconds
   is above --grace; --memory-limit plus --max-inflight-bytes fit the memory
   limit; the signing key's path is on a mounted volume.
3. The runtime's arguments, as the entrypoint gets them (the model folder and
   the signing key made here; only --host and --port changed, to loopback and
   a free port), start a server on a stamped, signed testdata/mlp_scripted.pt;
   the probes' paths and the scrape annotation's path answer 200.
"""

import copy
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import types
import urllib.error
import urllib.request

TSARCHIVE, DEPLOY, TESTDATA, VENV = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
from harness import check, finish, pip_venv  # noqa: E402

import yaml  # noqa: E402

# The SDK without its server's dependencies; kubernetes' client models (pydantic) with theirs.
SDK = [["kubernetes==37.0.1", "python-dateutil<3"], ["--no-deps", "kserve==0.21.0"]]


def import_sdk():
    """kserve.models and kubernetes.client.models, entered without the packages' __init__."""
    for name in ("kserve", "kubernetes"):
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ImportError(name)
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[name] = package
    import kserve.models
    import kubernetes.client.models
    return kserve.models, kubernetes.client.models


if os.environ.get("TSARCHIVE_KSERVE_VENV") != VENV:
    for requirements in SDK:
        python = pip_venv(VENV, requirements)
        if python is None:
            print("without KServe's SDK: skipping")
            sys.exit(77)
    os.environ["TSARCHIVE_KSERVE_VENV"] = VENV
    os.execv(python, [python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
KSERVE, K8S = import_sdk()
import pydantic  # noqa: E402  (the venv's, with kubernetes' client)


def resolve(type_name):
    for module in (KSERVE, K8S):
        if hasattr(module, type_name):
            return getattr(module, type_name)
    raise KeyError(f"neither KServe's SDK nor the kubernetes client has a model {type_name}")


PRIMITIVES = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}


def build(data, type_name, where, errors):
    """data (parsed YAML) as an instance of the SDK's type_name; each problem appended to errors."""
    container = re.fullmatch(r"(?:list|List)\[(.*)\]", type_name)
    if container:
        if not isinstance(data, list):
            errors.append(f"{where}: {type(data).__name__}, wanted a list")
            return None
        return [build(v, container.group(1), f"{where}[{i}]", errors) for i, v in enumerate(data)]
    mapping = re.fullmatch(r"(?:dict\(str, (.*)\)|Dict\[str, (.*)\])", type_name)
    if mapping:
        if not isinstance(data, dict):
            errors.append(f"{where}: {type(data).__name__}, wanted a map")
            return None
        value_type = mapping.group(1) or mapping.group(2)
        return {k: build(v, value_type, f"{where}.{k}", errors) for k, v in data.items()}
    if type_name == "object":
        return data
    if type_name in PRIMITIVES:
        ok = isinstance(data, PRIMITIVES[type_name]) and (type_name == "bool" or not isinstance(data, bool))
        if not ok:
            errors.append(f"{where}: {data!r} is {type(data).__name__}, wanted {type_name}")
        return data
    return build_model(data, resolve(type_name), where, errors)


def build_model(data, klass, where, errors):
    if not isinstance(data, dict):
        errors.append(f"{where}: {type(data).__name__}, wanted {klass.__name__}")
        return None
    if issubclass(klass, pydantic.BaseModel):  # the kubernetes client's core types
        try:
            return klass.model_validate(data, strict=True)
        except pydantic.ValidationError as e:
            for problem in e.errors():
                path = ".".join(str(p) for p in problem["loc"])
                errors.append(f"{where}.{path}: {problem['msg']} ({klass.__name__})")
            return None
    known = {json_key: attr for attr, json_key in klass.attribute_map.items()}
    kwargs = {}
    for key, value in data.items():
        if key not in known:
            errors.append(f"{where}.{key}: not a field of {klass.__name__}")
            continue
        kwargs[known[key]] = build(value, klass.openapi_types[known[key]], f"{where}.{key}", errors)
    try:
        return klass(**kwargs)
    except (ValueError, TypeError) as e:
        errors.append(f"{where}: {klass.__name__}: {e}")
        return None


KINDS = {"ServingRuntime": ("serving.kserve.io/v1alpha1", "V1alpha1ServingRuntime"),
         "InferenceService": ("serving.kserve.io/v1beta1", "V1beta1InferenceService")}


def validate(manifest, name):
    """The SDK object for one manifest, and the list of what is wrong with it."""
    errors = []
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    if kind not in KINDS:
        return None, [f"{name}: kind {kind!r}, wanted one of {sorted(KINDS)}"]
    api_version, model = KINDS[kind]
    if manifest.get("apiVersion") != api_version:
        errors.append(f"{name}.apiVersion: {manifest.get('apiVersion')!r}, wanted {api_version}")
    obj = build_model(manifest, resolve(model), name, errors)
    return obj, errors


def load(file):
    with open(os.path.join(DEPLOY, "kserve", file)) as f:
        return yaml.safe_load(f)


# 1. The manifests as the SDK's objects; the negative cases must fail where they say.
runtime_yaml, isvc_yaml = load("servingruntime.yaml"), load("inferenceservice.yaml")
runtime, errors = validate(runtime_yaml, "servingruntime.yaml")
check(not errors and isinstance(runtime, KSERVE.V1alpha1ServingRuntime), f"servingruntime.yaml: {errors}")
isvc, errors = validate(isvc_yaml, "inferenceservice.yaml")
check(not errors and isinstance(isvc, KSERVE.V1beta1InferenceService), f"inferenceservice.yaml: {errors}")


def mutated(manifest, path, change):
    """A deep copy with change(parent, key) applied at path (keys and list indices)."""
    m = copy.deepcopy(manifest)
    parent = m
    for key in path[:-1]:
        parent = parent[key]
    change(parent, path[-1])
    return m


def rename(new):
    return lambda parent, key: parent.__setitem__(new, parent.pop(key))


def retype(value):
    return lambda parent, key: parent.__setitem__(key, value)


container = ["spec", "containers", 0]
NEGATIVE = [
    # (manifest, path, change, what the error must name)
    (runtime_yaml, ["spec", "supportedModelFormats"], rename("supportedModelFormat"),
     "servingruntime.yaml.spec.supportedModelFormat: not a field of V1alpha1ServingRuntimeSpec"),
    (runtime_yaml, ["spec", "supportedModelFormats", 0, "autoSelect"], rename("autoselect"),
     "supportedModelFormats[0].autoselect: not a field of V1alpha1SupportedModelFormat"),
    (runtime_yaml, ["spec", "protocolVersions"], retype("v2"), "spec.protocolVersions: str, wanted a list"),
    (runtime_yaml, ["spec", "terminationGracePeriodSeconds"], retype(35),
     "spec.terminationGracePeriodSeconds: not a field of V1alpha1ServingRuntimeSpec"),
    (runtime_yaml, container + ["readinessProbe", "httpGet", "path"], rename("paht"),
     "containers[0].readinessProbe.httpGet.paht: Extra inputs are not permitted"),
    (runtime_yaml, container + ["ports", 0, "containerPort"], retype("8080"),
     "containers[0].ports.0.containerPort: Input should be a valid integer"),
    (runtime_yaml, container + ["args"], retype("--grace=25000"), "containers[0].args: Input should be a valid list"),
    (isvc_yaml, ["spec", "predictor", "model", "storageUri"], rename("storageURI"),
     "predictor.model.storageURI: not a field of V1beta1ModelSpec"),
    (isvc_yaml, ["spec", "predictor", "terminationGracePeriodSeconds"], retype("35"),
     "predictor.terminationGracePeriodSeconds: '35' is str, wanted int"),
    (isvc_yaml, ["spec", "predictor", "minReplicas"], retype(True), "predictor.minReplicas: True is bool, wanted int"),
    (isvc_yaml, ["kind"], retype("InferenceServices"), "kind 'InferenceServices'"),
]
for manifest, path, change, wanted in NEGATIVE:
    _, errors = validate(mutated(manifest, path, change), "servingruntime.yaml"
                         if manifest is runtime_yaml else "inferenceservice.yaml")
    check(any(wanted in e for e in errors), f"{'.'.join(map(str, path))} changed: wanted an error with {wanted!r}, "
                                            f"got {errors}")
print(f"the manifests validate with KServe {importlib.metadata.version('kserve')}'s models "
      f"(kubernetes client {importlib.metadata.version('kubernetes')}); {len(NEGATIVE)} broken copies refused")


# 2. What the manifests name exists in the server and the image.
SIZE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


def size(text):
    m = re.fullmatch(r"(\d+)([KMGT]i?)?", text)
    return int(m.group(1)) * SIZE.get(m.group(2) or "", 1) if m else None


help_text = subprocess.run([TSARCHIVE, "serve", "--help"], capture_output=True, text=True, check=True).stdout
OPTIONS = set(re.findall(r"^\s+(?:-\w,)?(--[a-z][\w-]*)", help_text, re.M))
FLAGS = {"--ready-check", "--no-validate", "--quiet", "--help", "--help-all"}
spec = runtime_yaml["spec"]
(serving,) = spec["containers"]
check(serving["name"] == "kserve-container", f"the runtime's container is {serving['name']!r}: KServe merges "
                                             "the predictor's settings into kserve-container")
args, options, i = serving["args"], {}, 0
while i < len(args):
    arg = args[i]
    if arg.startswith("-"):
        name, _, value = arg.partition("=")
        check(name in OPTIONS, f"the runtime's argument {arg}: serve --help has no {name}")
        if not _ and name not in FLAGS:
            i += 1
            value = args[i]
        options[name] = value
    else:
        check(arg == "{{.Name}}=/mnt/models", f"the runtime's model argument is {arg!r}, wanted "
                                              "{{.Name}}=/mnt/models (the InferenceService's name, KServe's folder)")
    i += 1
with open(os.path.join(DEPLOY, "tsarchive-entrypoint")) as f:
    entry_port = int(re.search(r"defaults\+=\(--port (\d+)\)", f.read()).group(1))
with open(os.path.join(DEPLOY, "Containerfile")) as f:
    exposed = re.findall(r"^EXPOSE (\d+)$", f.read(), re.M)
check(exposed == [str(entry_port)], f"the Containerfile exposes {exposed}; the entrypoint listens on {entry_port}")
check([p["containerPort"] for p in serving["ports"]] == [entry_port],
      f"containerPort {serving['ports']}; the image's entrypoint listens on {entry_port}")
probes = {kind: serving[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
for kind, get in probes.items():
    check(get["port"] == entry_port, f"{kind} asks port {get['port']}, the server listens on {entry_port}")
check(probes["readinessProbe"]["path"] == "/v2/health/ready" and probes["livenessProbe"]["path"] == "/v2/health/live",
      f"probes: {probes}")
notes = spec["annotations"]
for key in ("prometheus.kserve.io/port", "prometheus.io/port"):
    check(notes.get(key) == str(entry_port), f"annotation {key} is {notes.get(key)!r}, wanted '{entry_port}'")
check(notes.get("prometheus.io/scrape") == "true", "the runtime does not ask Prometheus to scrape its pods")
predictor = isvc_yaml["spec"]["predictor"]
model = predictor["model"]
formats = [f["name"] for f in spec["supportedModelFormats"]]
check(model["runtime"] == runtime_yaml["metadata"]["name"], f"the isvc runs {model['runtime']}")
check(model["modelFormat"]["name"] in formats, f"the isvc's format {model['modelFormat']} is not one of {formats}")
check(model["protocolVersion"] in spec["protocolVersions"] == ["v2"], f"protocols: {spec['protocolVersions']}")
grace_ms = int(options["--grace"])
check(predictor["terminationGracePeriodSeconds"] * 1000 > grace_ms,
      f"terminationGracePeriodSeconds {predictor['terminationGracePeriodSeconds']} is not above --grace {grace_ms} ms")
limit = size(serving["resources"]["limits"]["memory"])
held = size(options["--memory-limit"]) + size(options["--max-inflight-bytes"])
check(held < limit, f"--memory-limit and --max-inflight-bytes ({held} bytes) do not fit the memory limit ({limit})")
key_path = {e["name"]: e["value"] for e in model["env"]}["TSARCHIVE_VERIFY_KEY"]
mounts = [m for m in model["volumeMounts"] if key_path.startswith(m["mountPath"].rstrip("/") + "/")]
check(len(mounts) == 1 and mounts[0]["name"] in [v["name"] for v in predictor["volumes"]],
      f"TSARCHIVE_VERIFY_KEY={key_path} is on no volume the isvc mounts")



# 3. The runtime's arguments start a server whose probed and scraped paths answer.
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def serve_as_kserve(work):
    """The entrypoint with the runtime's args and the isvc's env, the model
    folder and key made in work; returns the server process and its URL."""
    models, key = os.path.join(work, "models"), os.path.join(work, "key")
    os.makedirs(models)
    shutil.copy(os.path.join(TESTDATA, "mlp_scripted.pt"), os.path.join(models, "mlp.pt"))
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key + ".pem"], check=True)
    subprocess.run(["openssl", "ec", "-in", key + ".pem", "-pubout", "-out", key + ".pub"], check=True,
                   capture_output=True)
    for step in (["stamp", "-q", "--keep-bytes"], ["sign", "-q", "--key", key + ".pem"]):
        subprocess.run([TSARCHIVE, *step, os.path.join(models, "mlp.pt")], check=True)
    argv = [a.replace("{{.Name}}", isvc_yaml["metadata"]["name"]).replace("/mnt/models", models) for a in args]
    env = dict(os.environ, TSARCHIVE_VERIFY_KEY=key + ".pub",
               PATH=os.path.dirname(os.path.abspath(TSARCHIVE)) + os.pathsep + os.environ["PATH"])
    server = subprocess.Popen([os.path.join(DEPLOY, "tsarchive-entrypoint"), *argv, "--host", "127.0.0.1",
                               "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    for line in server.stdout:
        started = re.match(r"tsarchive serve: (http://127\.0\.0\.1:\d+)/v2 ", line)
        if started:
            return server, started.group(1)
    server.wait()
    check(False, f"the entrypoint with the runtime's arguments exited {server.returncode} without serving")
    return None, None


with tempfile.TemporaryDirectory() as work:
    server, url = serve_as_kserve(work)
    if server:
        try:
            for kind, probe in probes.items():
                status, body = get(url + probe["path"])
                check(status == 200, f"{kind} {probe['path']}: {status} {body}")
            status, body = get(url + notes["prometheus.kserve.io/path"])
            check(status == 200 and 'tsarchive_serve_model_ready{model="mlp"} 1' in body,
                  f"scrape path {notes['prometheus.kserve.io/path']}: {status} {body[:200]}")
            check(notes["prometheus.io/path"] == notes["prometheus.kserve.io/path"], f"annotations: {notes}")
            status, body = get(f"{url}/v2/models/{isvc_yaml['metadata']['name']}")
            check(status == 200, f"the isvc's name is not the served model's: {status} {body}")
        finally:
            server.send_signal(signal.SIGTERM)
            check(server.wait(timeout=grace_ms / 1000 + 10) == 0, f"SIGTERM: exit {server.returncode}")
        print(f"the runtime's arguments serve a stamped, signed archive as {isvc_yaml['metadata']['name']}; "
              f"probes and scrape path answer 200; every option is in serve --help")

finish("deploy.kserve: ok")
