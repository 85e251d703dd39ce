"""The browser's part of `partita bench web`: opens the page in headless Chromium (the system's browser,
driven by Playwright), reloads it every second for the given seconds, and prints one JSON line: how many
loads, and the console errors the page logged."""
import json
import sys
import time

from playwright.sync_api import sync_playwright

url, seconds = sys.argv[1], float(sys.argv[2])
errors = []
loads = 0
with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path="/usr/bin/chromium",
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )
    page = browser.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    end = time.monotonic() + seconds
    page.goto(url)
    if url == "about:blank":
        # The browser alone: open, idle, on the same CPUs, for the same time.
        time.sleep(max(0.0, end - time.monotonic()))
    else:
        loads += 1
        while time.monotonic() + 1.0 < end:
            time.sleep(1.0)
            page.reload()
            loads += 1
    browser.close()
print(json.dumps({"loads": loads, "console_errors": errors}))
