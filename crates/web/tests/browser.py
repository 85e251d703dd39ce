"""The web view in a real browser (Debian's Chromium, driven by Playwright), for crates/cli/tests/web_browser.rs.

    browser.py URL SYSTEM SCREENSHOT

Loads the page, checks the system's partitions are listed and its timeline advances, prints READY and waits
for a line on standard input (the test has killed the routing partition's root process), then checks the page
shows routing's health event and its restart within 2 s, saves a screenshot, and checks the console stayed
free of errors. Prints OK and exits 0, or prints what failed and exits 1.
"""
import sys
import time

from playwright.sync_api import sync_playwright

url, system, screenshot = sys.argv[1], sys.argv[2], sys.argv[3]
errors = []


def fail(what):
    print("FAIL: " + what, flush=True)
    for e in errors:
        print("console: " + e, flush=True)
    sys.exit(1)


with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path="/usr/bin/chromium",
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "#" + system)
    for name in ["recorder", "routing", "monitor"]:
        try:
            page.wait_for_selector(f'#partitions tr[data-partition="{name}"]', timeout=10_000)
        except Exception:
            fail(f"partition {name} is not listed")
    page.wait_for_selector(".cpu .frames", timeout=5_000)
    page.wait_for_selector("svg.timeline rect[data-partition]", timeout=5_000)
    first = page.inner_text(".cpu .frames")
    time.sleep(2.2)
    second = page.inner_text(".cpu .frames")
    if first == second:
        fail(f"the timeline does not advance: {first!r} then {second!r}")
    # The routing partition's statistics, with rates once two states have come.
    try:
        page.wait_for_function(
            """() => [...document.querySelectorAll('#routers tbody tr')].some(
                   (r) => r.cells[2].textContent === 'surveillance/request' && Number(r.cells[5].textContent) > 0
                          && r.cells[6].textContent !== '')""",
            timeout=15_000,
        )
    except Exception:
        fail("no forwarded surveillance/request samples with a rate in the routes table: " + page.inner_text("#routers-section"))
    # The monitor's response times of the last second, and the last frame it received.
    try:
        page.wait_for_selector('#monitors tr[data-node="monitor"] td.p99', timeout=15_000)
        page.wait_for_function(
            """() => { const i = document.querySelector('#monitors img.frame'); return i && i.complete && i.naturalWidth > 0; }""",
            timeout=15_000,
        )
    except Exception:
        fail("no monitor figures or frame on the page: " + page.inner_text("#monitors-section"))
    restarts = page.inner_text('#partitions tr[data-partition="routing"] td.restarts')
    print("READY", flush=True)
    if not sys.stdin.readline():
        fail("the test did not say it killed routing")
    killed = time.monotonic()
    try:
        page.wait_for_selector('#events tr[data-partition="routing"][data-event="restart"]', timeout=2_000)
        page.wait_for_function(
            """([n]) => { const c = document.querySelector('#partitions tr[data-partition="routing"] td.restarts');
                           return c && Number(c.textContent) > n; }""",
            arg=[int(restarts)],
            timeout=max(100, int(2_000 - 1000 * (time.monotonic() - killed))),
        )
    except Exception:
        page.screenshot(path=screenshot, full_page=True)
        rows = page.inner_text("#events tbody")
        fail(f"no restart of routing shown within 2 s of its kill; events shown:\n{rows}")
    took = time.monotonic() - killed
    time.sleep(0.5)
    page.screenshot(path=screenshot, full_page=True)
    browser.close()
    if errors:
        fail("the console has errors")
    print(f"OK: the restart was shown {took:.2f} s after the kill", flush=True)
