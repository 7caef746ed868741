"""The JavaScript client (GET /kvod.js) tested in node against the real kvod: Tests/Web/js/kvod-client.test.mjs,
run with node's own test runner (requests, observations in both event encodings, subscribe/unsubscribe,
reconnection with sinceRev resume, connect failures). The module node imports is the one kvod serves.

Needs node 20 or later (node 20 with --experimental-websocket for its global WebSocket); skipped, saying so,
where there is none. The inspector's browser tests (test_inspector_*.py) run the same module in chromium.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

TEST_FILE = Path(__file__).parent / "js" / "kvod-client.test.mjs"


def node_command():
    node = shutil.which("node")
    if node is None:
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    match = re.match(r"v(\d+)\.(\d+)", version)
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    if major >= 22:
        return [node]
    if major == 21 or (major == 20 and minor >= 10):
        return [node, "--experimental-websocket"]
    return None


def test_javascript_client_in_node(kvod):
    command = node_command()
    if command is None:
        pytest.skip("no node 20.10+ here (its global WebSocket is needed): the JavaScript client's node tests did not run")
    environment = dict(os.environ, KVOD_HTTP_PORT=str(kvod.http_port))
    environment.pop("KVOD_JS", None)  # test the bytes kvod serves
    result = subprocess.run(command + ["--test", "--test-reporter=spec", str(TEST_FILE)],
                            capture_output=True, text=True, timeout=180, env=environment)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    passed = re.search(r"ℹ pass (\d+)", output)
    assert passed and int(passed.group(1)) >= 24, output[-3000:]
    assert re.search(r"ℹ fail 0", output), output[-3000:]
    kvod.assert_serving()
