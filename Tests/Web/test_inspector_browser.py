"""The inspector page (GET /) in a real browser: Debian's chromium driven by chromium-driver through selenium,
against the real kvod, with changes made by the real kvoclient.

scripts/test-web.sh installs chromium and chromium-driver (scripts/setup-browser.sh); where neither is found
(a machine without apt), these tests are skipped, saying so. Every test leaves a screenshot of the page in
.build/web-screenshots/; with KVOD_UPDATE_SCREENSHOT=1 the populated page's screenshot also replaces
docs/inspector.png (the one the README shows).
"""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import KVOD_BIN, ROOT, read_line

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

KVOCLIENT_BIN = os.environ.get("KVOCLIENT_BIN", str(Path(KVOD_BIN).parent / "kvoclient"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SCREENSHOTS = ROOT / ".build" / "web-screenshots"

pytestmark = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                reason="chromium and chromium-driver are not installed (scripts/setup-browser.sh)")


def start_chromium(*extra_arguments):
    os.environ["SE_OFFLINE"] = "true"  # selenium must use the system driver, never download one
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,900",
                     "--disable-gpu", "--no-first-run", "--password-store=basic", *extra_arguments):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def browser(request):
    driver = start_chromium()
    yield driver
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name}.png"))
    # The page must not have logged errors (CSP violations, exceptions) while a test drove it.
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    driver.quit()
    assert errors == [], errors


def kvoclient(kvod, *arguments):
    result = subprocess.run([KVOCLIENT_BIN, "--port", str(kvod.port), *arguments],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def capture_for_docs(driver, name):
    """With KVOD_UPDATE_SCREENSHOT=1, the page as it is now becomes docs/<name>.png (shown by the docs)."""
    if os.environ.get("KVOD_UPDATE_SCREENSHOT") == "1":
        driver.save_screenshot(str(ROOT / "docs" / f"{name}.png"))


def wait(driver, condition, seconds=5, message=""):
    # The page draws its tree again on every change: an element found a moment ago may be gone; try again.
    return WebDriverWait(driver, seconds, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(
        lambda _: condition(), message)


def open_inspector(driver, kvod):
    driver.get(f"http://127.0.0.1:{kvod.http_port}/")
    wait(driver, lambda: driver.find_element(By.ID, "status").text == "connected", 10, "the page did not connect")
    wait(driver, lambda: driver.find_element(By.ID, "app").is_displayed(), 5, "the app did not show")


def listed_ids(driver):
    """The ids listed, read in one step (the list is drawn again on every creation and deletion)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#object-list li[data-id]')].map((item) => item.dataset.id)")


def select_object(driver, object_id):
    wait(driver, lambda: object_id in listed_ids(driver), 5, f"{object_id} is not listed")
    driver.find_element(By.CSS_SELECTOR, f'#object-list li[data-id="{object_id}"]').click()
    wait(driver, lambda: driver.find_element(By.ID, "object-title").text == object_id)
    wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, "#tree li[data-path]"), 5, "no tree")


def tree_value(driver, path):
    """The text of the value shown at `path`, read in one step (the tree is drawn again on every change, so
    an element found in one call may be gone by the next)."""
    return driver.execute_script(
        """const item = [...document.querySelectorAll('#tree li[data-path]')].find((node) => node.dataset.path === arguments[0]);
           const value = item && item.querySelector(':scope > span.value');
           return value ? value.innerText : null;""", path)


def test_objects_created_by_kvoclient_appear_and_disappear_live(kvod, browser):
    kvoclient(kvod, "create", "existing", '{"n": 1}')
    open_inspector(browser, kvod)
    wait(browser, lambda: "existing" in listed_ids(browser), 5, "an object present before the page loaded is missing")
    # Kept current by an object-set observation, not by polling.
    assert browser.find_element(By.ID, "list-mode").text == "live"
    observers = kvod.tcp_call({"op": "info", "object": "existing"})["observers"]
    assert any(observer.get("pattern") == "*" for observer in observers), observers
    started = time.monotonic()
    kvoclient(kvod, "create", "person:ada", '{"name": "Ada"}')
    wait(browser, lambda: "person:ada" in listed_ids(browser), 3, "a created object did not appear")
    assert time.monotonic() - started < 3
    kvoclient(kvod, "delete", "existing")
    wait(browser, lambda: "existing" not in listed_ids(browser), 3, "a deleted object stayed listed")
    # The filter narrows the list.
    browser.find_element(By.ID, "object-filter").send_keys("ada")
    wait(browser, lambda: listed_ids(browser) == ["person:ada"])


def test_a_value_set_by_kvoclient_changes_in_the_tree_within_a_second_and_is_highlighted(kvod, browser):
    kvoclient(kvod, "create", "person", json.dumps({"name": "Ada", "address": {"city": "London", "zip": "N1"}, "tags": ["a"]}))
    open_inspector(browser, kvod)
    select_object(browser, "person")
    assert tree_value(browser, "address.city") == '"London"'
    assert tree_value(browser, "address.zip") == '"N1"'
    started = time.monotonic()
    kvoclient(kvod, "set", "person", "address.city", '"Paris"')
    wait(browser, lambda: tree_value(browser, "address.city") == '"Paris"', 1.5, "the tree did not change")
    assert time.monotonic() - started < 1.5
    changed = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="address.city"]')
    assert "changed" in changed.get_attribute("class")
    sibling = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="address.zip"]')
    assert "changed" not in sibling.get_attribute("class"), "an unchanged sibling was highlighted"
    # Array operations from another client reach the tree too (kind 2 events applied in place).
    kvoclient(kvod, "insert", "person", "tags", '"b"', '"c"')
    wait(browser, lambda: tree_value(browser, "tags.2") == '"c"', 2, "inserted elements did not show")
    # A key added later shows up as well.
    kvoclient(kvod, "set", "person", "age", "36")
    wait(browser, lambda: tree_value(browser, "age") == "36", 4, "a new key did not show")


def test_a_subscription_made_in_the_page_shows_its_events(kvod, browser):
    kvoclient(kvod, "create", "sensor", '{"celsius": 20}')
    open_inspector(browser, kvod)
    select_object(browser, "sensor")
    browser.find_element(By.ID, "subscribe-keypath").send_keys("celsius")
    prior = browser.find_element(By.CSS_SELECTOR, '#subscribe-form input[value="prior"]')
    prior.click()
    browser.find_element(By.CSS_SELECTOR, "#subscribe-form button[type=submit]").click()
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#events li")) == 1, 3, "no initial event")
    assert "initial" in browser.find_element(By.CSS_SELECTOR, "#events li").text
    assert "new 20" in browser.find_element(By.CSS_SELECTOR, "#events li").text
    kvoclient(kvod, "set", "sensor", "celsius", "21.5")
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#events li")) == 3, 3, "no change events")
    newest, prior_line, _ = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#events li")]
    assert "valueChanged" in newest and "new 21.5" in newest and "old 20" in newest, newest
    assert "prior" in prior_line and "old 20" in prior_line, prior_line
    # The server has the observation; removing the chip unobserves it.
    observers = kvod.tcp_call({"op": "info", "object": "sensor"})["observers"]
    assert [observer.get("keyPath") for observer in observers].count("celsius") == 2  # the tree's and the subscription's
    browser.find_element(By.CSS_SELECTOR, "#subscriptions li button").click()
    wait(browser, lambda: [o.get("keyPath") for o in kvod.tcp_call({"op": "info", "object": "sensor"})["observers"]].count("celsius") == 1,
         3, "unsubscribing in the page left the observation on the server")


def test_a_refused_write_shows_its_error_and_changes_nothing(kvod, browser):
    definition = {"name": "Thermometer", "properties": {"celsius": {"type": "number", "min": -90, "max": 60}}}
    assert kvod.tcp_call({"op": "defineClass", "class": definition})["ok"]
    kvoclient(kvod, "create", "probe", '{"celsius": 20}', "--class", "Thermometer")
    open_inspector(browser, kvod)
    select_object(browser, "probe")
    browser.find_element(By.ID, "edit-keypath").send_keys("celsius")
    browser.find_element(By.ID, "edit-value").send_keys("500")
    browser.find_element(By.CSS_SELECTOR, "#edit-form button[type=submit]").click()
    wait(browser, lambda: browser.find_element(By.ID, "edit-error").text != "", 3, "no error shown")
    error = browser.find_element(By.ID, "edit-error").text
    assert error.startswith("invalid_value:") and "property: celsius" in error and "rule: max" in error, error
    assert kvod.tcp_call({"op": "get", "object": "probe", "keyPath": "celsius"})["value"] == 20
    # Not JSON: refused in the page, before anything is sent.
    value = browser.find_element(By.ID, "edit-value")
    value.clear()
    value.send_keys("Oslo")
    browser.find_element(By.CSS_SELECTOR, "#edit-form button[type=submit]").click()
    wait(browser, lambda: "not JSON" in browser.find_element(By.ID, "edit-error").text)
    # An array operation on something that is not an array: the server's type_mismatch.
    Select(browser.find_element(By.ID, "edit-op")).select_by_value("remove")
    browser.find_element(By.ID, "edit-index").send_keys("0")
    browser.find_element(By.CSS_SELECTOR, "#edit-form button[type=submit]").click()
    wait(browser, lambda: browser.find_element(By.ID, "edit-error").text.startswith("type_mismatch:"), 3)
    # A valid write goes through and the tree follows.
    Select(browser.find_element(By.ID, "edit-op")).select_by_value("set")
    value.clear()
    value.send_keys("-5")
    browser.find_element(By.CSS_SELECTOR, "#edit-form button[type=submit]").click()
    wait(browser, lambda: "done" in browser.find_element(By.ID, "edit-result").text, 3)
    wait(browser, lambda: tree_value(browser, "celsius") == "-5", 2)


def test_classes_and_bindings_are_listed_and_the_page_is_captured(kvod, browser):
    definition = {"name": "Person", "properties": {"name": {"type": "string", "required": True},
                                                   "age": {"type": "integer", "min": 0},
                                                   "address": {"type": "object"}, "languages": {"type": "array"}}}
    assert kvod.tcp_call({"op": "defineClass", "class": definition})["ok"]
    kvoclient(kvod, "create", "ada", json.dumps({"name": "Ada Lovelace", "age": 36, "address": {"city": "London"},
                                               "languages": ["English", "French"]}), "--class", "Person")
    kvoclient(kvod, "create", "badge", '{"text": ""}')
    kvoclient(kvod, "create", "grace", '{"name": "Grace Hopper", "age": 85}', "--class", "Person")
    kvoclient(kvod, "bind", "ada:name", "badge:text", "--convert", "'Hello, ' + $value", "--now")
    open_inspector(browser, kvod)
    wait(browser, lambda: "Person" in browser.find_element(By.ID, "classes").text, 3, "the class is not listed")
    wait(browser, lambda: "ada.name → badge.text" in browser.find_element(By.ID, "bindings").text, 3,
         "the binding is not listed")
    select_object(browser, "ada")
    browser.find_element(By.ID, "subscribe-keypath").send_keys("address.city")
    browser.find_element(By.CSS_SELECTOR, "#subscribe-form button[type=submit]").click()
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#events li"), 3)
    kvoclient(kvod, "set", "ada", "address.city", '"Paris"')
    wait(browser, lambda: tree_value(browser, "address.city") == '"Paris"', 2)
    assert kvod.tcp_call({"op": "get", "object": "badge", "keyPath": "text"})["value"] == "Hello, Ada Lovelace"
    capture_for_docs(browser, "inspector")


PASSWORD = "correct horse battery"


def kvod_with_users(kvod_factory, tmp_path, users):
    """A kvod with `users` (name -> rule, each with PASSWORD) in a users file."""
    users_file = tmp_path / "users.json"
    for name, rule in users.items():
        subprocess.run([KVOD_BIN, "user", "add", "--users", str(users_file), name, rule, "--hash-cost", "minimal"],
                       check=True, capture_output=True, env={"KVOD_PASSWORD": PASSWORD})
    return kvod_factory("--users", str(users_file))


def open_login(browser, kvod):
    """Opens the page of a kvod with users: the login card, not the app."""
    browser.get(f"http://127.0.0.1:{kvod.http_port}/")
    wait(browser, lambda: browser.find_element(By.ID, "login").is_displayed(), 10, "no login form")
    assert not browser.find_element(By.ID, "app").is_displayed()


def log_in(browser, kvod, user):
    """Opens the page and logs in as `user` with PASSWORD."""
    open_login(browser, kvod)
    browser.find_element(By.ID, "login-user").send_keys(user)
    browser.find_element(By.ID, "login-password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait(browser, lambda: browser.find_element(By.ID, "app").is_displayed(), 5, "login did not open the app")


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


def test_empty_states_say_what_to_do_and_the_revision_is_known_at_once(kvod, browser):
    open_inspector(browser, kvod)
    objects = browser.find_element(By.ID, "object-list")
    wait(browser, lambda: objects.text == "No objects yet: create one with the form below.", 5, objects.text)
    wait(browser, lambda: browser.find_element(By.ID, "revision").text == "rev 0", 5, "the revision was not shown")
    kvoclient(kvod, "create", "alpha", '{"n":1}')
    wait(browser, lambda: listed_ids(browser) == ["alpha"], 5)
    assert browser.find_element(By.ID, "revision").text == "rev 1"
    browser.find_element(By.ID, "object-filter").send_keys("zzz")
    wait(browser, lambda: objects.text.startswith("No id contains “zzz”"), 5, objects.text)
    # The favicon is served (the fixture fails the test on any SEVERE browser log entry, a 404 included).
    status, headers, _ = kvod.http_get("/favicon.ico")
    assert status == 200 and headers["content-type"] == "image/svg+xml"


def test_ids_are_paged_and_searched_by_the_server_and_stay_live(kvod, browser):
    created = kvod.tcp_call({"op": "batch", "ops": [{"op": "create", "object": f"obj-{n:03}"} for n in range(450)]})
    assert created["ok"] is True, created
    open_inspector(browser, kvod)
    wait(browser, lambda: len(listed_ids(browser)) == 200, 5, "no first page")
    assert listed_ids(browser)[0] == "obj-000" and listed_ids(browser)[-1] == "obj-199"
    assert browser.find_element(By.ID, "object-count").text == "page 1"
    assert not browser.find_element(By.ID, "page-prev").is_enabled()
    browser.find_element(By.ID, "page-next").click()
    wait(browser, lambda: listed_ids(browser)[:1] == ["obj-200"], 5, "no second page")
    browser.find_element(By.ID, "page-next").click()
    wait(browser, lambda: listed_ids(browser)[-1:] == ["obj-449"] and len(listed_ids(browser)) == 50, 5, "no last page")
    assert not browser.find_element(By.ID, "page-next").is_enabled()
    # A creation within the page shows at once; one on another page does not disturb it.
    kvoclient(kvod, "create", "obj-449b")
    kvoclient(kvod, "create", "obj-000a")
    wait(browser, lambda: listed_ids(browser)[-1:] == ["obj-449b"], 5, "a creation in the page was not shown")
    assert "obj-000a" not in listed_ids(browser)
    browser.find_element(By.ID, "page-prev").click()
    wait(browser, lambda: listed_ids(browser)[:1] == ["obj-200"], 5, "no way back")
    # Search: answered by the server (text: ids containing it; with * a pattern), and live.
    search = browser.find_element(By.ID, "object-filter")
    search.send_keys("obj-44")
    wait(browser, lambda: listed_ids(browser) == [f"obj-44{n}" for n in range(10)] + ["obj-449b"], 5, str(listed_ids(browser)))
    assert browser.find_element(By.ID, "object-count").text == "11 found"
    capture_for_docs(browser, "inspector-list")
    assert not browser.find_element(By.ID, "pager").is_displayed()
    kvoclient(kvod, "create", "xobj-441")
    wait(browser, lambda: "xobj-441" in listed_ids(browser), 5, "a new match was not shown")
    search.clear()
    search.send_keys("obj-1*")
    wait(browser, lambda: len(listed_ids(browser)) == 100 and listed_ids(browser)[0] == "obj-100", 5, str(listed_ids(browser)[:3]))
    search.clear()
    browser.execute_script("document.getElementById('object-filter').dispatchEvent(new Event('input'))")
    wait(browser, lambda: listed_ids(browser)[:1] == ["obj-200"], 5, "the page did not come back")


def test_a_where_expression_makes_the_list_a_live_query(kvod, browser):
    for n in range(6):
        kvod.tcp_call({"op": "create", "object": f"order-{n}", "values": {"status": "open" if n % 2 else "closed", "total": n * 50}})
    kvod.tcp_call({"op": "create", "object": "note-1", "values": {"status": "open", "total": 999}})
    open_inspector(browser, kvod)
    wait(browser, lambda: len(listed_ids(browser)) == 7, 5, "no list")
    browser.find_element(By.ID, "object-filter").send_keys("order-*")
    where = browser.find_element(By.ID, "object-where")
    where.send_keys("status == 'open' && total > 60")
    wait(browser, lambda: listed_ids(browser) == ["order-3", "order-5"], 5, str(listed_ids(browser)))
    assert browser.find_element(By.ID, "object-count").text == "2 found"
    # Live: objects enter and leave as the expression starts or stops holding on them.
    kvod.tcp_call({"op": "set", "object": "order-1", "keyPath": "total", "value": 70})
    kvod.tcp_call({"op": "set", "object": "order-5", "keyPath": "status", "value": "closed"})
    kvod.tcp_call({"op": "create", "object": "order-9", "values": {"status": "closed", "total": 500}})
    wait(browser, lambda: listed_ids(browser) == ["order-1", "order-3"], 5, str(listed_ids(browser)))
    # Every id with an empty search; a malformed expression is explained where the list was.
    browser.find_element(By.ID, "object-filter").clear()
    where.clear()
    where.send_keys("total > 400")
    wait(browser, lambda: listed_ids(browser) == ["note-1", "order-9"], 5, str(listed_ids(browser)))
    where.send_keys(" &&")
    wait(browser, lambda: "column" in browser.find_element(By.ID, "object-list").text
         or "expected" in browser.find_element(By.ID, "object-list").text, 5, browser.find_element(By.ID, "object-list").text)


def test_an_object_with_a_ttl_counts_down_and_is_shown_expired(kvod, browser):
    kvod.tcp_call({"op": "create", "object": "sess-1", "values": {"user": "ada"}, "ttl": 5})
    kvod.tcp_call({"op": "create", "object": "plain", "values": {"n": 1}})
    open_inspector(browser, kvod)
    select_object(browser, "plain")
    assert not browser.find_element(By.ID, "object-expiry").is_displayed()
    select_object(browser, "sess-1")
    expiry = browser.find_element(By.ID, "object-expiry")
    wait(browser, lambda: expiry.is_displayed() and expiry.text in [f"expires in {n} s" for n in range(1, 6)], 5, expiry.text)
    wait(browser, lambda: browser.find_element(By.ID, "object-title").text == "sess-1 (expired)", 12,
         browser.find_element(By.ID, "object-title").text)
    assert "expired (its time to live ended)" in browser.find_element(By.ID, "tree").text
    assert not expiry.is_displayed()
    wait(browser, lambda: "sess-1" not in listed_ids(browser), 5, "the expired object stayed in the list")


def test_a_deleted_object_takes_its_controls_with_it_and_errors_do_not_outlive_their_action(kvod, browser):
    kvoclient(kvod, "create", "doomed", '{"n":1}')
    open_inspector(browser, kvod)
    select_object(browser, "doomed")
    browser.find_element(By.ID, "edit-keypath").send_keys("n.deeper")
    browser.find_element(By.ID, "edit-value").send_keys("1")
    browser.find_element(By.CSS_SELECTOR, "#edit-form button[type=submit]").click()
    error = browser.find_element(By.ID, "edit-error")
    wait(browser, lambda: error.text.startswith("type_mismatch"), 5, "no error shown")
    kvoclient(kvod, "delete", "doomed")
    wait(browser, lambda: browser.find_element(By.ID, "object-title").text == "doomed (deleted)", 5,
         "the deletion was not shown")
    assert not browser.find_element(By.ID, "delete-object").is_displayed()
    assert not browser.find_element(By.ID, "edit-form").is_displayed()
    assert error.text == "", "an old error stayed on screen"


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


def test_the_tree_folds_clips_long_strings_fills_key_paths_and_copies_json(kvod, browser):
    long_text = "x" * 2000
    values = {"big": list(range(300)), "small": {"a": 1, "b": [True, None]}, "long": long_text}
    kvoclient(kvod, "create", "shapes", json.dumps(values))
    open_inspector(browser, kvod)
    select_object(browser, "shapes")
    # A 300-element array starts folded; a small object unfolded; both fold and unfold on a click.
    big = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="big"] > .summary')
    assert big.text == "▸ [300]" and not browser.find_elements(By.CSS_SELECTOR, '#tree li[data-path="big.0"]')
    big.click()
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, '#tree li[data-path="big.0"]'), 3, "did not unfold")
    # Unfolded, it shows 200 elements and pages the rest.
    assert not browser.find_elements(By.CSS_SELECTOR, '#tree li[data-path="big.200"]')
    more = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="big"] .more')
    assert more.text == "show 100 more of 100"
    browser.execute_script("arguments[0].click()", more)
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, '#tree li[data-path="big.299"]'), 3, "no next page")
    small = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="small"] > .summary')
    assert small.text == "▾ {2}"
    small.click()
    wait(browser, lambda: not browser.find_elements(By.CSS_SELECTOR, '#tree li[data-path="small.a"]'), 3, "did not fold")
    # A 2,000-character string is clipped, shown whole on a click, and never widens the page.
    text = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="long"] > .value')
    assert "(2000 characters: click to show all)" in text.text
    text.click()
    wait(browser, lambda: long_text in text.text, 3, "not shown whole")
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), "the page scrolls sideways"
    assert browser.find_element(By.ID, "schema-panel").location["x"] < browser.execute_script("return window.innerWidth")
    # A click on a key fills its key path into the forms.
    browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="big"] > .key').click()
    browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="big.7"] > .index').click()
    assert browser.find_element(By.ID, "edit-keypath").get_attribute("value") == "big.7"
    assert browser.find_element(By.ID, "subscribe-keypath").get_attribute("value") == "big.7"
    # Copy as JSON (the clipboard is observed through a stand-in for this test).
    browser.execute_script("window.copied = []; navigator.clipboard.writeText = async (text) => { window.copied.push(text); };")
    small = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="small"]')
    browser.execute_script("arguments[0].click()", small.find_element(By.CSS_SELECTOR, ":scope > .copy"))
    wait(browser, lambda: browser.execute_script("return window.copied.length") == 1, 3, "nothing copied")
    assert json.loads(browser.execute_script("return window.copied[0]")) == values["small"]


def test_the_event_log_has_times_a_filter_and_pause_and_counts_what_it_drops(kvod, browser):
    kvoclient(kvod, "create", "ticker", '{"a": 0, "b": 0}')
    open_inspector(browser, kvod)
    select_object(browser, "ticker")
    for key_path in ("a", "b"):
        field = browser.find_element(By.ID, "subscribe-keypath")
        field.clear()
        field.send_keys(key_path)
        browser.find_element(By.CSS_SELECTOR, "#subscribe-form button[type=submit]").click()
        wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#subscriptions li")) == "ab".index(key_path) + 1, 3)
    lines = lambda: browser.find_elements(By.CSS_SELECTOR, "#events li")
    wait(browser, lambda: len(lines()) == 2, 3, "no initial events")
    assert all(len(line.find_element(By.TAG_NAME, "time").text) == 12 for line in lines()), "no time of arrival"
    # Filter: only the lines about key path b stay visible.
    browser.find_element(By.ID, "event-filter").send_keys("ticker b")
    wait(browser, lambda: [line.is_displayed() for line in lines()].count(True) == 1, 3, "the filter did not apply")
    browser.find_element(By.ID, "event-filter").clear()
    browser.execute_script("document.getElementById('event-filter').dispatchEvent(new Event('input'))")
    # Pause: events are held and counted, then shown on resume.
    browser.find_element(By.ID, "pause-events").click()
    kvoclient(kvod, "set", "ticker", "a", "1")
    count = browser.find_element(By.ID, "event-count")
    wait(browser, lambda: count.text == "3 (1 held)", 3, count.text)
    assert len(lines()) == 2
    browser.find_element(By.ID, "pause-events").click()
    wait(browser, lambda: len(lines()) == 3 and count.text == "3", 3, count.text)
    # Past 500 lines the oldest go, and the count says how many.
    for value in range(2, 502):
        kvod.tcp_call({"op": "set", "object": "ticker", "keyPath": "a", "value": value})
    wait(browser, lambda: count.text == "503 (3 dropped past 500)", 10, count.text)
    assert len(lines()) == 500
    capture_for_docs(browser, "inspector-events")


def test_values_edit_inline_typed_with_refusals_at_the_field_and_arrays_grow_and_shrink_from_the_tree(kvod, browser):
    kvod.tcp_call({"op": "defineClass", "class": {"name": "Temp", "properties": {
        "celsius": {"type": "number", "max": 100}, "list": {"type": "array"}, "name": {"type": "string"}}}})
    kvoclient(kvod, "create", "probe", '{"celsius": 20, "list": [1, 2, 3], "name": "x"}', "--class", "Temp")
    open_inspector(browser, kvod)
    select_object(browser, "probe")
    # The write controls come with the server's answer about the user's rights.
    wait(browser, lambda: browser.find_element(By.ID, "edit-json").is_displayed(), 3, "no write controls")

    def editor(path):
        """The open editor of `path`, found afresh (the tree is drawn again on every change)."""
        return browser.find_element(By.CSS_SELECTOR, f'#tree li[data-path="{path}"] > .inline-edit')

    def open_editor(path):
        value = browser.find_element(By.CSS_SELECTOR, f'#tree li[data-path="{path}"] > .value')
        webdriver.ActionChains(browser).double_click(value).perform()
        wait(browser, lambda: editor(path), 3)

    def fill(path, type_name, text):
        Select(editor(path).find_element(By.TAG_NAME, "select")).select_by_value(type_name)
        field = editor(path).find_element(By.TAG_NAME, "input")
        field.clear()
        field.send_keys(text)
        editor(path).find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    def error_of(path):
        return editor(path).find_element(By.CLASS_NAME, "error").text

    # Checked before sending: not a number.
    open_editor("celsius")
    assert Select(editor("celsius").find_element(By.TAG_NAME, "select")).first_selected_option.text == "number"
    fill("celsius", "number", "warm")
    wait(browser, lambda: "is not a number" in error_of("celsius"), 3)
    # Refused by the class: the server's error at the field, cleared when the user types again.
    fill("celsius", "number", "500")
    wait(browser, lambda: error_of("celsius").startswith("invalid_value"), 3)
    capture_for_docs(browser, "inspector-inline-edit")
    # Another client's change elsewhere draws the tree again: the open editor stays, text and error kept.
    kvoclient(kvod, "set", "probe", "name", '"elsewhere"')
    wait(browser, lambda: tree_value(browser, "name") == '"elsewhere"', 3)
    assert editor("celsius").find_element(By.TAG_NAME, "input").get_attribute("value") == "500"
    assert error_of("celsius").startswith("invalid_value")
    editor("celsius").find_element(By.TAG_NAME, "input").send_keys("0")
    assert error_of("celsius") == ""
    fill("celsius", "number", "42")
    wait(browser, lambda: tree_value(browser, "celsius") == "42", 3, "the edit was not applied")
    assert json.loads(kvoclient(kvod, "get", "probe", "celsius")) == 42
    assert not browser.find_elements(By.CSS_SELECTOR, "#tree .inline-edit"), "the editor stayed open"
    # A string stays a string, whatever it looks like.
    open_editor("name")
    fill("name", "string", "true")
    wait(browser, lambda: tree_value(browser, "name") == '"true"', 3)
    # Arrays: append and remove from the tree.
    append = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="list"] > .tree-action')
    browser.execute_script("arguments[0].click()", append)
    wait(browser, lambda: editor("list"), 3)
    fill("list", "number", "4")
    wait(browser, lambda: tree_value(browser, "list.3") == "4", 3, "not appended")
    remove = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="list.0"] > .tree-action[title="remove this element"]')
    browser.execute_script("arguments[0].click()", remove)
    wait(browser, lambda: tree_value(browser, "list.0") == "2", 3, "not removed")
    assert json.loads(kvoclient(kvod, "get", "probe", "list")) == [2, 3, 4]
    # Insert before an element: at its position.
    before = browser.find_element(By.CSS_SELECTOR, '#tree li[data-path="list.1"] > .tree-action[title="insert an element before this one"]')
    browser.execute_script("arguments[0].click()", before)
    wait(browser, lambda: editor("list.1"), 3)
    assert editor("list.1").find_element(By.CSS_SELECTOR, "button[type=submit]").text == "Insert"
    fill("list.1", "number", "2.5")
    wait(browser, lambda: tree_value(browser, "list.1") == "2.5", 3, "not inserted")
    assert json.loads(kvoclient(kvod, "get", "probe", "list")) == [2, 2.5, 3, 4]


def test_a_whole_object_is_edited_as_json_and_saved_in_one_batch_unless_it_changed_meanwhile(kvod, browser):
    kvoclient(kvod, "create", "doc", '{"a": 1, "b": [1]}')
    open_inspector(browser, kvod)
    select_object(browser, "doc")
    subscribe = browser.find_element(By.ID, "subscribe-keypath")
    subscribe.send_keys("a")
    browser.find_element(By.CSS_SELECTOR, "#subscribe-form button[type=submit]").click()
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#events li")) == 1, 3, "no initial event")
    wait(browser, lambda: browser.find_element(By.ID, "edit-json").is_displayed(), 3)
    browser.find_element(By.ID, "edit-json").click()
    text = browser.find_element(By.ID, "json-text")
    wait(browser, lambda: json.loads(text.get_attribute("value") or "null") == {"a": 1, "b": [1]}, 3)
    error = browser.find_element(By.ID, "json-error")
    save = browser.find_element(By.CSS_SELECTOR, "#json-form button[type=submit]")
    for wrong, message in (("{nope", "not JSON"), ("[1, 2]", "a JSON object")):
        text.clear()
        text.send_keys(wrong)
        save.click()
        wait(browser, lambda: message in error.text, 3, error.text)
    text.clear()
    text.send_keys('{"a": 2, "c": "new"}')
    save.click()
    wait(browser, lambda: not browser.find_element(By.ID, "json-form").is_displayed(), 3, error.text)
    assert json.loads(kvoclient(kvod, "get", "doc")) == {"a": 2, "c": "new"}
    wait(browser, lambda: tree_value(browser, "c") == '"new"', 3, "the tree did not follow")
    # The observation of a went on: one change, not a deletion.
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#events li")) == 2, 3)
    assert "valueChanged" in browser.find_elements(By.CSS_SELECTOR, "#events li")[0].text
    # Changed by someone else after it was opened: refused, nothing written.
    browser.find_element(By.ID, "edit-json").click()
    wait(browser, lambda: browser.find_element(By.ID, "json-form").is_displayed(), 3)
    kvoclient(kvod, "set", "doc", "a", "3")
    text = browser.find_element(By.ID, "json-text")
    text.clear()
    text.send_keys('{"a": 9}')
    browser.find_element(By.CSS_SELECTOR, "#json-form button[type=submit]").click()
    wait(browser, lambda: "changed since it was opened" in error.text, 3, error.text)
    assert json.loads(kvoclient(kvod, "get", "doc")) == {"a": 3, "c": "new"}


def test_the_dashboard_draws_the_servers_figures_from_metrics_live(kvod, browser):
    kvoclient(kvod, "create", "counter", '{"n": 0}')
    open_inspector(browser, kvod)
    tile = lambda name: browser.find_element(By.CSS_SELECTOR, f'#tiles [data-tile="{name}"] .tile-value').text
    wait(browser, lambda: tile("objects") == "1", 5, "no objects figure")
    assert tile("storage") == "writable"
    assert tile("sessions") == "0"
    assert tile("memory").endswith("MiB")
    # Rates need two samples: write for a while, then requests/s shows a figure above zero, with a line drawn.
    for value in range(60):
        kvod.tcp_call({"op": "set", "object": "counter", "keyPath": "n", "value": value})
    wait(browser, lambda: tile("requests") not in ("–", "0.0"), 8, f"requests/s: {tile('requests')}")
    # The header's revision follows the server's, through the figures, though the page observes none of these sets.
    wait(browser, lambda: browser.find_element(By.ID, "revision").text == "rev 61", 6,
         browser.find_element(By.ID, "revision").text)
    wait(browser, lambda: browser.find_element(By.CSS_SELECTOR, '#tiles [data-tile="requests"] polyline').get_attribute("points"),
         8, "no line drawn")
    kvoclient(kvod, "create", "second")
    wait(browser, lambda: tile("objects") == "2", 6, "the figures are not live")
    # A session whose connection is gone is still held (for its grace): counted.
    assert kvod.tcp_call({"op": "session", "grace": 60})["ok"] is True
    wait(browser, lambda: tile("sessions") == "1", 6, f"sessions: {tile('sessions')}")
    capture_for_docs(browser, "inspector-dashboard")
    browser.find_element(By.ID, "toggle-dashboard").click()
    assert not browser.find_element(By.ID, "tiles").is_displayed()


def test_a_server_admin_sees_the_users_and_the_nodes_state(kvod_factory, tmp_path, browser):
    kvod = kvod_with_users(kvod_factory, tmp_path, {"root": "*=read,write,admin", "ann": "ann-*=read,write"})
    log_in(browser, kvod, "root")
    wait(browser, lambda: browser.find_element(By.ID, "admin-views").is_displayed(), 5, "no admin views")
    wait(browser, lambda: [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#users summary")]
         == ["ann (1 rule)", "root (1 rule)"], 5, "the users were not listed")
    facts = lambda: dict(zip([term.text for term in browser.find_elements(By.CSS_SELECTOR, "#node dt")],
                             [detail.text for detail in browser.find_elements(By.CSS_SELECTOR, "#node dd")]))
    wait(browser, lambda: facts().get("revision") == "0" and len(facts().get("digest", "")) == 64, 5, str(facts()))
    assert "hash" not in browser.find_element(By.ID, "users").get_attribute("textContent")


def test_in_cluster_mode_the_admin_view_lists_the_other_nodes_with_their_position_and_chain(kvod_cluster, browser):
    first = kvod_cluster[0]
    open_inspector(browser, first)
    wait(browser, lambda: browser.find_element(By.ID, "admin-views").is_displayed(), 10, "no admin views (open mode)")
    # Past two checkpoints (every 16 stream entries): each node has claimed its chain at 16 and 32.
    for value in range(40):
        assert first.tcp_call({"op": "set", "object": "ready", "keyPath": "n", "value": value})["ok"] is True
    deadline = time.time() + 20
    while len(first.tcp_call({"op": "digest"}).get("peers", [])) < 2 and time.time() < deadline:
        time.sleep(0.2)
    digest = first.tcp_call({"op": "digest"})
    browser.find_element(By.ID, "refresh-schema").click()
    rows = lambda: [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
                    for row in browser.find_elements(By.CSS_SELECTOR, "#peers tbody tr")]
    wait(browser, lambda: [row[0] for row in rows()] == ["n2", "n3"], 10, f"peers: {rows()} (digest {digest})")
    for row, peer in zip(rows(), digest["peers"]):
        assert row[1] == str(peer["applied"]) and int(row[1]) >= 32, row
        assert row[2] == str(peer["rev"]), row
        assert row[3] == peer["chain"][:12] + "…", row
        assert row[4] == "same chain", row
    facts = dict(zip([term.text for term in browser.find_elements(By.CSS_SELECTOR, "#node dt")],
                     [detail.text for detail in browser.find_elements(By.CSS_SELECTOR, "#node dd")]))
    assert facts.get("node") == "n1" and facts.get("integrity") == "applying" and len(facts.get("chain", "")) == 64, facts
    capture_for_docs(browser, "inspector-cluster")


def test_a_single_server_shows_no_other_nodes(kvod, browser):
    open_inspector(browser, kvod)
    wait(browser, lambda: browser.find_element(By.ID, "admin-views").is_displayed(), 5, "no admin views (open mode)")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#node dd"), 5, "no node facts")
    assert not browser.find_element(By.ID, "peers-view").is_displayed()


def test_a_user_who_is_not_a_server_admin_is_told_the_figures_are_for_admins(kvod_factory, tmp_path, browser):
    kvod = kvod_with_users(kvod_factory, tmp_path, {"ann": "ann-*=read,write,admin"})
    log_in(browser, kvod, "ann")
    wait(browser, lambda: browser.find_element(By.ID, "dashboard-note").text
         == "the server's figures are for server admins (admin on *)", 5, browser.find_element(By.ID, "dashboard-note").text)
    assert [tile.text for tile in browser.find_elements(By.CSS_SELECTOR, "#tiles .tile-value")] == ["–"] * 10


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


def test_the_page_is_served_with_a_content_security_policy(kvod):
    status, headers, body = kvod.http_get("/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in headers["content-security-policy"]
    assert b'<script type="module" src="/inspector.js">' in body
    for path, content_type in (("/inspector.js", "text/javascript"), ("/inspector.css", "text/css"),
                               ("/kvod.js", "text/javascript")):
        status, headers, body = kvod.http_get(path)
        assert status == 200 and headers["content-type"].startswith(content_type), path
        asset = ROOT / "Sources" / "KVOServer" / "HTTP" / "Assets" / path.lstrip("/")
        assert body == asset.read_bytes(), f"{path} served differs from {asset}"


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
