"""Fixtures for the web tests: a real kvod binary on ephemeral ports, and raw sockets to it.

kvod is `KVOD_BIN` (default: .build/debug/kvod, which `swift build` made). Each test that asks for
`kvod` gets its own process (`--in-memory --port 0 --http-port 0` plus the test's flags), stopped with
SIGTERM afterwards; the fixture checks it exited cleanly, so a crash caused by a test fails it.
"""
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KVOD_BIN = os.environ.get("KVOD_BIN", str(ROOT / ".build" / "debug" / "kvod"))


class KVOD:
    """A running kvod: its ports and a few helpers that speak to it."""

    def __init__(self, extra_args, tmp_path):
        args = [KVOD_BIN, "--host", "127.0.0.1", "--port", "0", "--http-port", "0", "--log-level", "warning"]
        if "--data" not in extra_args:
            args.append("--in-memory")
        self.stderr_path = tmp_path / "kvod.stderr"
        self.stderr = open(self.stderr_path, "w")
        self.process = subprocess.Popen(args + list(extra_args), stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.port = self.http_port = self.tls_port = None
        deadline = time.time() + 30
        while self.port is None or self.http_port is None:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"kvod exited before listening: {self.stderr_path.read_text()}")
            if "listening for HTTP on" in line:
                self.http_port = int(line.rsplit(":", 1)[1])
            elif "listening for TLS on" in line:
                self.tls_port = int(line.rsplit(":", 1)[1])
            elif "listening on" in line:
                self.port = int(line.rsplit(":", 1)[1])
            if time.time() > deadline:
                raise RuntimeError("kvod did not print its ports")

    @property
    def ws_url(self):
        return f"ws://127.0.0.1:{self.http_port}/ws"

    def http_get(self, path, headers=None, timeout=10):
        """One GET over a fresh connection; returns (status, headers dict, body bytes)."""
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.http_port}\r\nConnection: close\r\n"
        for name, value in (headers or {}).items():
            request += f"{name}: {value}\r\n"
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=timeout) as sock:
            sock.sendall((request + "\r\n").encode())
            data = read_until_closed(sock)
        return parse_response(data)

    def tcp_call(self, request):
        """One request over a fresh JSON-lines TCP connection; returns the reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall((json.dumps(request) + "\n").encode())
            return json.loads(read_line(sock))

    def assert_serving(self):
        """kvod still answers on TCP and over HTTP."""
        assert self.tcp_call({"op": "ping", "id": "alive"})["ok"] is True
        assert self.http_get("/healthz")[0] == 200

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("kvod did not stop within 20 s of SIGTERM")
        self.stderr.close()
        return self.process.returncode


def read_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return data.decode()


def read_until_closed(sock):
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def parse_response(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


@pytest.fixture
def kvod_factory(tmp_path):
    started = []

    def start(*extra_args):
        server = KVOD(extra_args, tmp_path)
        started.append(server)
        return server

    yield start
    for server in started:
        code = server.stop()
        assert code == 0, f"kvod exited with {code}: {server.stderr_path.read_text()[-2000:]}"


@pytest.fixture
def kvod(kvod_factory):
    return kvod_factory()


@pytest.fixture
def browser(request):
    """Chromium for the inspector's browser tests (test_inspector_*.py, helpers in inspector_browser.py, which
    imports selenium: only those tests ask for this). The test fails if the page logged an error (a CSP
    violation, an exception, a failed request) while it drove it; a screenshot is left in .build/web-screenshots/."""
    from inspector_browser import SCREENSHOTS, start_chromium
    driver = start_chromium()
    yield driver
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name}.png"))
    # The page must not have logged errors (CSP violations, exceptions) while a test drove it.
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    driver.quit()
    assert errors == [], errors


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NATSCluster:
    """Three nats-server processes with JetStream, routed into one NATS cluster (as scripts/cluster.sh starts
    them, on free ports), for the kvod cluster fixture."""

    def __init__(self, tmp_path):
        server = os.environ.get("KVOD_NATS_SERVER")
        if not server:
            pytest.skip("KVOD_NATS_SERVER is not set (scripts/setup-python.sh sets it): no NATS for a cluster")
        config = tmp_path / "nats.conf"
        config.write_text("jetstream {\n    sync_interval: always\n}\n")
        self.client_ports = [free_port() for _ in range(3)]
        route_ports = [free_port() for _ in range(3)]
        routes = ",".join(f"nats://127.0.0.1:{port}" for port in route_ports)
        self.processes = []
        for index in range(3):
            store = tmp_path / f"nats-{index + 1}"
            store.mkdir()
            log = open(tmp_path / f"nats-{index + 1}.log", "w")
            self.processes.append(subprocess.Popen(
                [server, "-c", str(config), "-a", "127.0.0.1", "-p", str(self.client_ports[index]), "-js",
                 "-sd", str(store), "-n", f"nats-{index + 1}", "--cluster_name", "kvodweb",
                 "--cluster", f"nats://127.0.0.1:{route_ports[index]}", "--routes", routes],
                stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 15
        for port in self.client_ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise RuntimeError("nats-server did not start")
                    time.sleep(0.1)

    @property
    def urls(self):
        return ",".join(f"nats://127.0.0.1:{port}" for port in self.client_ports)

    def stop(self):
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def kvod_cluster(tmp_path):
    """Three kvod nodes (n1-n3) replicating through NATS JetStream, each with its HTTP port, checkpoints every
    16 stream entries; ready (a write went through every node) when the test starts."""
    nats = NATSCluster(tmp_path)
    nodes = []
    try:
        for index in range(3):
            directory = tmp_path / f"n{index + 1}"
            directory.mkdir()
            nodes.append(KVOD(["--cluster", nats.urls, "--node", f"n{index + 1}", "--cluster-stream", "web",
                               "--cluster-checkpoint-every", "16"], directory))
        deadline = time.time() + 60
        while True:
            reply = nodes[0].tcp_call({"op": "create", "object": "ready"})
            # `exists`: an earlier attempt answered `unavailable` ("it may still be applied") was applied later.
            if reply.get("ok") is True or reply.get("error", {}).get("code") == "exists":
                break
            if time.time() > deadline:
                raise RuntimeError("the cluster did not become ready")
            time.sleep(0.2)
        yield nodes
    finally:
        codes = [node.stop() for node in nodes]
        nats.stop()
    assert codes == [0] * len(nodes), f"a kvod node exited with {codes}"
