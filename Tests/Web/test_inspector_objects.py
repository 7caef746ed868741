"""The inspector's object list and selected object in a real browser (helpers: inspector_browser.py): ids listed
live, paged and searched by the server, live queries, empty states, an object's time to live and its deletion.
"""
import time

from inspector_browser import (By, capture_for_docs, kvoclient, listed_ids, needs_browser, open_inspector,
                               select_object, wait)

pytestmark = needs_browser


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
