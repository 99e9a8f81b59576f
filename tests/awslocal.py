"""The AWS side of the Slurm program tests, on 127.0.0.1: moto's server (EC2, Secrets Manager, S3)
and a fake instance metadata service (IMDSv2) that answers for any instance moto runs.

- moto runs with MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION=true, so a launch template whose instance
  type EC2 does not offer fails RunInstances as a whole, the way InsufficientInstanceCapacity does:
  nothing starts. That is the injected capacity error (moto 5 `ec2/models/instances.py`).
- The fake IMDS serves `/<instance id>/latest/...`: a program given
  AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:<port>/<instance id> (the AWS SDKs' own
  override) sees that instance's metadata: `api/token` (PUT), `meta-data/instance-id` and
  `meta-data/tags/instance/<key>` read live from moto, as EC2 updates tags of a running instance.
- Both stop when their context ends; every client call has a timeout.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_MAX_ATTEMPTS": "1"}
NO_CAPACITY_TYPE = "p5.nocapacity"  # not an instance type: RunInstances fails, nothing starts


def available() -> str | None:
    """Why the AWS side cannot run here, or None."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as error:
        return f"{error.name} is not installed (pip install -e '.[test]')"
    if aws_cli() is None:
        return "the aws CLI is not installed (pip install -e '.[test]' brings awscli)"
    return None


def aws_cli() -> str | None:
    beside = Path(sys.executable).parent / "aws"
    return str(beside) if beside.exists() else shutil.which("aws")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server(timeout: float = 30.0):
    """moto's server on a free 127.0.0.1 port; yields its URL."""
    port = free_port()
    env = {**os.environ, "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true", **CREDENTIALS}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's server did not start on {url}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def client(service: str, url: str):
    import boto3

    return boto3.client(service, region_name=REGION, endpoint_url=url, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


class _Imds(BaseHTTPRequestHandler):
    ec2 = None  # set per server

    def log_message(self, *args):  # quiet
        pass

    def _answer(self, code: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        parts = self.path.strip("/").split("/", 1)
        if len(parts) == 2 and parts[1] == "latest/api/token":
            return self._answer(200, "fake-imds-token")
        return self._answer(404)

    def do_GET(self):
        instance, _, item = self.path.strip("/").partition("/")
        if self.headers.get("X-aws-ec2-metadata-token") != "fake-imds-token":
            return self._answer(401)
        if item == "latest/meta-data/instance-id":
            return self._answer(200, instance)
        prefix = "latest/meta-data/tags/instance/"
        if item.startswith(prefix):
            key = item[len(prefix):]
            found = self.ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]},
                                                    {"Name": "key", "Values": [key]}])["Tags"]
            return self._answer(200, found[0]["Value"]) if found else self._answer(404)
        return self._answer(404)


@contextlib.contextmanager
def fake_imds(moto_url: str):
    """Yields the base URL; append `/<instance id>` for one instance's view."""
    handler = type("Imds", (_Imds,), {"ec2": client("ec2", moto_url)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def cluster_env(role: str, cluster: str, fleet: str, moto_url: str, **extra: str) -> str:
    """An environment file as the user data writes it (docs/aws-training.md), plus the test's
    AWS_* lines (moto's endpoint and fake credentials) that the programs pass to the aws CLI."""
    import shlex

    values = {"FLEETFORM_ROLE": role, "FLEETFORM_CLUSTER": cluster, "FLEETFORM_BLUEPRINT": cluster.split("_")[0],
              "FLEETFORM_FLEET": fleet, "FLEETFORM_REGION": REGION, "FLEETFORM_CONTROLLER_ADDR": "127.0.0.1",
              "FLEETFORM_LUSTRE_MOUNTS": "", "FLEETFORM_STATE_VOLUME": "", **extra,
              "AWS_ENDPOINT_URL": moto_url, **CREDENTIALS}
    return "".join(f"{k}={shlex.quote(v)}\n" for k, v in values.items())


CLUSTER = "a_dev"  # <metadata.name>_<stack> of the test blueprint


def blueprint(nodes: str) -> str:
    """A small AWS blueprint whose training fleet targets Slurm 22.05, the release Debian's
    daemons here are (the bootstrap refuses any other)."""
    from conftest import AWS_TRAINING_HEAD

    return AWS_TRAINING_HEAD + f"""\
    instance_type: p5.48xlarge
    image: ami-0123456789abcdef0  # an image with Slurm 22.05: fleetform's default brings 23.11
    nodes: {nodes}
    scheduler: {{type: slurm, slurm_version: "22.05", partitions: [{{name: gpu, default: true}}]}}
"""


def render_fleet(tmp: Path, text: str) -> Path:
    """Render a blueprint into tmp/rendered; the training fleet's slurm folder."""
    from fleetform.pipeline import check
    from fleetform.render import render
    from fleetform.render.output import write

    (tmp / "a.yaml").write_text(text)
    result = check(tmp / "a.yaml")
    assert result.model is not None, [f.to_text() for f in result.findings]
    write(render(result.model), tmp / "rendered")
    return tmp / "rendered" / "train" / "slurm"


def need(missing: str | None) -> None:
    """Fail in CI (CI set), skip elsewhere, when a component is missing."""
    import pytest

    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}; .ci/run installs it")
        pytest.skip(f"{missing}; CI fails instead of skipping")


ARTIFACT_KEY = "fleetform/rendered.tar.gz"  # providers/aws/storage.py ARTIFACT_KEY


def publish(s3, bucket: str, rendered: Path, changed: tuple[Path, ...] = ()) -> str:
    """What `pulumi up` does with a render: the folder as one object at the artifact's key in the
    versioned config bucket (providers/aws/storage.py). `changed` are files a test overrode after
    the render: manifest.json is written again with their digests first, so what is published is
    what the machines check and run. Returns the new S3 version id."""
    from fleetform.render.archive import archive

    manifest = json.loads((rendered / "manifest.json").read_text())
    for path in changed:
        manifest["files"][str(path.relative_to(rendered))] = hashlib.sha256(path.read_bytes()).hexdigest()
    if changed:
        (rendered / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    listed = [*manifest["files"], "manifest.json"]
    files = {name: (rendered / name).read_bytes() for name in listed}
    return s3.put_object(Bucket=bucket, Key=ARTIFACT_KEY, Body=archive(files))["VersionId"]
