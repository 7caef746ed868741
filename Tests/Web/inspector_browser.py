"""What the inspector's browser tests (test_inspector_*.py) share: chromium driven by chromium-driver through
selenium, against the real kvod, with changes made by the real kvoclient. The `browser` fixture is in conftest.py.

scripts/test-web.sh installs chromium and chromium-driver (scripts/setup-browser.sh); where selenium is missing,
importing this module skips the test module, and where neither browser nor driver is found the tests skip
themselves (`needs_browser`), saying so. Every test leaves a screenshot of the page in .build/web-screenshots/;
with KVOD_UPDATE_SCREENSHOT=1 the populated page's screenshot also replaces docs/inspector.png (the one the
README shows).
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import KVOD_BIN, ROOT

# Selenium's names the tests use, imported here once: a test module without selenium is skipped, not failed.
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402,F401 (for the tests)
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402,F401 (Select: for the tests)

KVOCLIENT_BIN = os.environ.get("KVOCLIENT_BIN", str(Path(KVOD_BIN).parent / "kvoclient"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SCREENSHOTS = ROOT / ".build" / "web-screenshots"

# Each test module's `pytestmark`.
needs_browser = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
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
