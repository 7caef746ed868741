"""The inspector's tree and its writes in a real browser (helpers: inspector_browser.py): values changed by
another client shown live, refused writes, folding and clipping, inline editors, and a whole object edited as JSON.
"""
import json
import time

from inspector_browser import (By, capture_for_docs, kvoclient, needs_browser, open_inspector, Select, select_object,
                               tree_value, wait, webdriver)

pytestmark = needs_browser


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
