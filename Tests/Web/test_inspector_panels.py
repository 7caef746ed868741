"""The inspector's other panels in a real browser (helpers: inspector_browser.py): observations and the event log,
classes and bindings, the dashboard, and a server admin's users and cluster nodes.
"""
import json
import time

from inspector_browser import (By, capture_for_docs, kvoclient, kvod_with_users, log_in, needs_browser,
                               open_inspector, select_object, tree_value, wait)

pytestmark = needs_browser


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


def test_the_dashboard_draws_the_servers_figures_from_metrics_live(kvod, browser):
    kvoclient(kvod, "create", "counter", '{"n": 0}')
    open_inspector(browser, kvod)
    tile = lambda name: browser.find_element(By.CSS_SELECTOR, f'#tiles [data-tile="{name}"] .tile-value').text
    wait(browser, lambda: tile("objects") == "1", 5, "no objects figure")
    assert tile("storage") == "writable"
    assert tile("sessions") == "0"
    assert tile("memory").endswith("MiB")
    # Counts since the start (a loaded machine's debug build may have a few over the default 10 ms).
    assert tile("slow").isdigit() and tile("stalls").isdigit()
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


def test_the_dashboard_lists_the_newest_slow_requests_and_loop_stalls_without_values(kvod_factory, browser):
    # --slow-request 0: every request and every loop iteration that worked is "slow", so the list fills at once.
    kvod = kvod_factory("--slow-request", "0")
    kvoclient(kvod, "create", "vault", '{"pin": "1234"}')
    open_inspector(browser, kvod)
    # Read in one script: the page replaces the rows every 2 s, which would make elements found one call earlier stale.
    rows = lambda: browser.execute_script(
        "return [...document.querySelectorAll('#slow-table tbody tr')].map((row) => row.dataset.kind + ' ' + row.innerText.replace(/\\s+/g, ' '))")
    # The page's own reads (metrics, slow, every 2 s) are listed too: the set is made once the list shows them.
    # (The message of a wait is made when it starts: it shows the rows before the wait.)
    wait(browser, lambda: any(" metrics " in row for row in rows()), 6, f"the page's reads are not listed: {rows()}")
    assert kvod.tcp_call({"op": "set", "object": "vault", "keyPath": "pin", "value": "secret-4321"})["ok"] is True
    wait(browser, lambda: any("set vault pin" in row for row in rows()), 6,
         f"no slow set listed: {rows()}; {browser.find_element(By.ID, 'dashboard-note').text}; {browser.find_element(By.ID, 'slow-note').text}")
    listed = rows()
    assert any(row.startswith("stall ") and " loop stall: " in row for row in listed), f"no stall listed: {listed}"
    assert len(listed) <= 15, "the ten newest requests, then the five newest stalls"
    assert not any("secret-4321" in row or "1234" in row for row in listed), listed
    assert "over 0 ms" in browser.find_element(By.ID, "slow-note").text
    browser.find_element(By.ID, "toggle-dashboard").click()
    assert not browser.find_element(By.ID, "slow-view").is_displayed()


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
    assert [tile.text for tile in browser.find_elements(By.CSS_SELECTOR, "#tiles .tile-value")] == ["–"] * 12
    assert not browser.find_element(By.ID, "slow-view").is_displayed(), "the slow log is for server admins too"
