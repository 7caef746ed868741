"""Who and what reaches the inspector, in a real browser (helpers: inspector_browser.py): login and logout, a
reader's controls, the page while disconnected, the assets and their Content-Security-Policy, and DNS rebinding.
"""
import json
import socket

import pytest

from conftest import ROOT, read_line
from inspector_browser import (By, kvoclient, kvod_with_users, listed_ids, log_in, needs_browser, open_inspector,
                               open_login, PASSWORD, SCREENSHOTS, select_object, start_chromium, wait)

pytestmark = needs_browser


def test_login_with_users_defined(kvod_factory, tmp_path, browser):
    kvod = kvod_with_users(kvod_factory, tmp_path, {"ann": "*=read,write"})
    open_login(browser, kvod)
    browser.find_element(By.ID, "login-user").send_keys("ann")
    browser.find_element(By.ID, "login-password").send_keys("wrong")
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait(browser, lambda: browser.find_element(By.ID, "login-error").text.startswith("unauthenticated:"), 5)
    password = browser.find_element(By.ID, "login-password")
    password.clear()
    password.send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait(browser, lambda: browser.find_element(By.ID, "app").is_displayed(), 5, "login did not open the app")
    assert browser.find_element(By.ID, "whoami").text == "ann"


def test_exhausted_login_attempts_are_explained_and_logging_out_asks_again(kvod_factory, tmp_path, browser):
    kvod = kvod_with_users(kvod_factory, tmp_path, {"ann": "*=read,write"})
    open_login(browser, kvod)
    browser.find_element(By.ID, "login-user").send_keys("ann")
    error = browser.find_element(By.ID, "login-error")
    for attempt in range(1, 6):
        password = browser.find_element(By.ID, "login-password")
        password.clear()
        password.send_keys(f"wrong {attempt}")
        browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
        expected = "Too many failed attempts" if attempt == 5 else f"attemptsLeft: {5 - attempt}"
        wait(browser, lambda: expected in error.text, 10, f"attempt {attempt}: {error.text}")
    # The page reconnects; a right password then logs in, and logging out asks again.
    password = browser.find_element(By.ID, "login-password")
    password.clear()
    password.send_keys(PASSWORD)
    wait(browser, lambda: browser.find_element(By.ID, "status").text == "connected", 10, "no reconnection")
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait(browser, lambda: browser.find_element(By.ID, "app").is_displayed(), 5, "login did not open the app")
    browser.find_element(By.ID, "log-out").click()
    wait(browser, lambda: browser.find_element(By.ID, "login").is_displayed(), 10, "logging out did not ask again")
    assert not browser.find_element(By.ID, "app").is_displayed()
    browser.get_log("browser")  # the closed connection's error, expected


def test_a_reader_sees_no_write_controls(kvod_factory, tmp_path, browser):
    kvod = kvod_with_users(kvod_factory, tmp_path, {"root": "*=read,write,admin", "reader": "*=read"})
    with socket.create_connection(("127.0.0.1", kvod.port), timeout=10) as sock:
        for request in ({"op": "auth", "user": "root", "password": PASSWORD},
                        {"op": "create", "object": "doc", "values": {"n": 1}}):
            sock.sendall((json.dumps(request) + "\n").encode())
            assert json.loads(read_line(sock))["ok"] is True
    log_in(browser, kvod, "reader")
    wait(browser, lambda: not browser.find_element(By.ID, "create-form").is_displayed(), 5, "a reader was offered Create")
    assert not browser.find_element(By.ID, "admin-views").is_displayed(), "a reader was shown the users"
    select_object(browser, "doc")
    wait(browser, lambda: not browser.find_element(By.ID, "edit-form").is_displayed(), 5, "a reader was offered Change")
    assert not browser.find_element(By.ID, "delete-object").is_displayed()
    assert not browser.find_elements(By.CSS_SELECTOR, "#tree .tree-action"), "a reader was offered tree edits"
    assert browser.find_element(By.ID, "subscribe-form").is_displayed(), "a reader may observe"


def test_while_disconnected_the_page_is_marked_stale_and_its_forms_are_off(kvod, browser):
    kvoclient(kvod, "create", "shown", '{"n":1}')
    open_inspector(browser, kvod)
    select_object(browser, "shown")
    assert not browser.find_element(By.ID, "stale").is_displayed()
    kvod.stop()
    wait(browser, lambda: browser.find_element(By.ID, "stale").is_displayed(), 10, "no stale marker")
    assert browser.find_element(By.ID, "status").text in ("reconnecting…", "disconnected")
    for control in ("create-id", "edit-keypath", "subscribe-keypath"):
        assert not browser.find_element(By.ID, control).is_enabled(), f"{control} stayed enabled"
    assert not browser.find_element(By.ID, "delete-object").is_enabled()
    # The failed reconnection attempts are logged by the browser as errors: expected here. Leave the page (it
    # would go on trying) and drain them.
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "stale.png"))
    browser.get("about:blank")
    browser.get_log("browser")


def test_the_page_is_served_with_a_content_security_policy(kvod):
    status, headers, body = kvod.http_get("/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in headers["content-security-policy"]
    assert b'<script type="module" src="/inspector.js">' in body
    assets = ROOT / "Sources" / "KVOServer" / "HTTP" / "Assets"
    # Each of the inspector's modules at its own path; the client, one module, made of its parts in their names' order.
    served = {f"/{path.relative_to(assets)}": [path] for path in [assets / "inspector.js", assets / "inspector.css",
                                                                   *sorted((assets / "inspector").glob("*.js"))]}
    served["/kvod.js"] = sorted((assets / "kvod").glob("*.js"))
    assert len(served) > 4 and len(served["/kvod.js"]) > 1, served
    for path, files in served.items():
        status, headers, body = kvod.http_get(path)
        content_type = "text/css" if path.endswith(".css") else "text/javascript"
        assert status == 200 and headers["content-type"].startswith(content_type), path
        assert "script-src 'self'" in headers["content-security-policy"], path
        assert body == b"".join(file.read_bytes() for file in files), f"{path} served differs from {files}"
    assert kvod.http_get("/kvod/client.js")[0] == 404


REBIND_NAME = "rebind.attacker.test"


@pytest.fixture
def rebinding_browser(request):
    """Chromium whose resolver answers 127.0.0.1 for REBIND_NAME: what a DNS rebinding attacker's name does
    after its first, short-lived answer. Its console holds the refusals, so it is not checked for errors."""
    driver = start_chromium(f"--host-resolver-rules=MAP {REBIND_NAME} 127.0.0.1")
    yield driver
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name}.png"))
    driver.quit()


# What the attacker's page runs: read /metrics, open its own-origin WebSocket and one to 127.0.0.1.
ATTACK_SCRIPT = """
const done = arguments[arguments.length - 1];
const port = arguments[0];
const result = {};
function socket(url) {
    return new Promise(resolve => {
        let opened = false;
        const ws = new WebSocket(url);
        ws.onopen = () => { opened = true; ws.send('{"op":"list","id":1}'); };
        ws.onmessage = event => { resolve("message: " + event.data.slice(0, 200)); ws.close(); };
        ws.onerror = () => resolve(opened ? "error after open" : "refused");
        setTimeout(() => resolve(opened ? "open" : "timeout"), 5000);
    });
}
(async () => {
    try {
        const response = await fetch("/metrics");
        result.metricsStatus = response.status;
        result.metricsBody = (await response.text()).slice(0, 300);
    } catch (error) { result.metricsStatus = "failed: " + error; }
    result.sameOriginSocket = await socket(`ws://${location.host}/ws`);
    result.loopbackSocket = await socket(`ws://127.0.0.1:${port}/ws`);
    done(result);
})();
"""


def test_a_dns_rebinding_page_gets_neither_the_inspector_nor_the_store_nor_metrics(kvod, rebinding_browser):
    driver = rebinding_browser
    kvoclient(kvod, "create", "secret", '{"pin": 1234}')
    driver.get(f"http://{REBIND_NAME}:{kvod.http_port}/")
    assert driver.execute_script("return document.getElementById('app')") is None, "the inspector loaded"
    text = driver.find_element(By.TAG_NAME, "body").text
    assert "is not served here" in text and "--http-allowed-host" in text, text
    driver.set_script_timeout(20)
    result = driver.execute_async_script(ATTACK_SCRIPT, kvod.http_port)
    assert result["metricsStatus"] == 421 and "kvod_objects" not in result["metricsBody"], result
    assert result["sameOriginSocket"] == "refused", result
    assert result["loopbackSocket"] == "refused", result  # Origin http://rebind.attacker.test:P is not ours
    assert "secret" not in json.dumps(result)
    # The same browser on localhost: the inspector works and lists the object.
    driver.get(f"http://localhost:{kvod.http_port}/")
    wait(driver, lambda: driver.find_element(By.ID, "status").text == "connected", 10, "the page did not connect")
    wait(driver, lambda: "secret" in listed_ids(driver), 5, "the object is not listed on localhost")
    assert driver.execute_async_script(
        "const done = arguments[0]; fetch('/metrics').then(r => r.text()).then(done, e => done('failed ' + e));"
    ).count("kvod_objects") >= 1


def test_a_rebinding_name_given_with_http_allowed_host_works(kvod_factory, rebinding_browser):
    kvod = kvod_factory("--http-allowed-host", REBIND_NAME)
    driver = rebinding_browser
    driver.get(f"http://{REBIND_NAME}:{kvod.http_port}/")
    wait(driver, lambda: driver.find_element(By.ID, "status").text == "connected", 10, "the page did not connect")
