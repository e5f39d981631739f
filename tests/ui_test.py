#!/usr/bin/python3
"""The web dashboard in a real browser (issue 15): headless Chromium driven by
Selenium (Debian's chromium, chromium-driver, python3-selenium).

Starts `unipool server` (devbox cluster, no agents: --assume-nodes-up) with
an admin and two tenant tokens, then checks that every page renders with no
console error, that a job goes submit -> running -> cancelled through the UI,
that a job's progress reports draw charts, that the sim's HTML report opens
in it, and that a tenant sees only its own queues' jobs. Screenshots of each
page go to --out (the test's artifacts; docs/ui.md shows copies).

Exit 0 when every check passes, 1 on the first failure, 77 (skipped) when
the browser packages are missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    print("ui_test: python3-selenium is not installed (scripts/install-deps.sh); skipped")
    sys.exit(77)

from serverlib import SOURCE, Server, fail, job_yaml

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"


class Browser:
    def __init__(self, out):
        options = Options()
        options.binary_location = CHROMIUM
        for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=1400,1000", "--disable-extensions",
                    "--no-first-run", "--no-default-browser-check"]:
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(30)
        self.out = out
        self.wait = WebDriverWait(self.driver, 20)

    def errors(self):
        """Console messages at SEVERE since the last call."""
        return [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]

    def no_errors(self, page):
        errs = self.errors()
        if errs:
            fail(f"{page}: console errors: {errs}")

    def shot(self, name):
        self.driver.save_screenshot(os.path.join(self.out, f"ui-{name}.png"))

    def find(self, css, timeout=20):
        return WebDriverWait(self.driver, timeout).until(
            EC.presence_of_element_located((By.CSS_SELECTOR, css)))

    def text_of(self, css):
        for _ in range(50):  # a live update may replace the element meanwhile
            try:
                return self.find(css).text
            except StaleElementReferenceException:
                time.sleep(0.1)
        fail(f"{css} kept being replaced")

    def type_into(self, css, text):
        """Replaces the text of `css` with `text` (again if it was redrawn)."""
        for _ in range(50):
            try:
                el = self.find(css)
                el.clear()
                el.send_keys(text)
                if el.get_attribute("value") == text:
                    return
            except StaleElementReferenceException:
                pass
            time.sleep(0.1)
        fail(f"cannot type into {css}")

    def select(self, css, value):
        for _ in range(50):
            try:
                Select(self.find(css)).select_by_value(value)
                return
            except StaleElementReferenceException:
                time.sleep(0.1)
        fail(f"{css} kept being replaced")

    def click(self, css):
        """Clicks `css`, again if a live update replaced it first."""
        for _ in range(50):
            try:
                self.find(css).click()
                return
            except StaleElementReferenceException:
                time.sleep(0.1)
        fail(f"{css} kept being replaced")

    def until(self, what, predicate, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            try:
                if predicate():
                    return
            except Exception:  # an element replaced by a live update
                pass
            time.sleep(0.2)
        fail(f"timed out waiting for {what}")

    def sign_in(self, url, token):
        self.driver.get(url + "/#/")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(url + "/#/")
        self.type_into("#token", token)
        self.click("#signin")
        self.find("#summary")

    def go(self, url, hash_, ready_css):
        self.driver.get(url + "/" + hash_)
        self.find(ready_css)

    def quit(self):
        self.driver.quit()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--out", required=True, help="directory for the screenshots")
    args = parser.parse_args()
    for path in (CHROMEDRIVER, CHROMIUM):
        if not os.access(path, os.X_OK):
            print(f"ui_test: {path} is missing (Debian chromium, chromium-driver); skipped")
            sys.exit(77)
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="unipool-ui-")
    server = Server(args.binary, work, "ui_test")
    browser = None
    try:
        for queue in ("team-a", "team-b"):
            server.call("PUT", f"/v1/queues/{queue}", body=json.dumps({"guarantee": 8, "weight": 1}))
        # Jobs of both tenants: one runs in each queue, one of alice's waits.
        mine = server.call("POST", "/v1/jobs", "alice", job_yaml("alice-train", "team-a", 16),
                           "application/yaml")["id"]
        theirs = server.call("POST", "/v1/jobs", "bob", job_yaml("bob-secret", "team-b", 8),
                             "application/yaml")["id"]
        server.call("POST", "/v1/jobs", "alice", job_yaml("alice-waits", "team-a", 16),
                    "application/yaml")
        for _ in range(100):
            if server.call("GET", f"/v1/jobs/{mine}")["state"] == "Running":
                break
            time.sleep(0.1)
        # Progress reports, as a job's agent would send them: charts.
        gen = server.call("GET", f"/v1/jobs/{mine}")["generation"]
        for step in range(1, 31):
            data = {"step": step * 10, "loss": 3.0 / (1 + step), "throughput": 1000 + step,
                    "gradNorm": 1.0 + 0.1 * (step % 5)}
            server.call("POST", f"/v1/jobs/{mine}/report",
                        body=json.dumps({"generation": gen, "kind": "progress", "data": data}))
            time.sleep(0.02)

        browser = Browser(args.out)
        url = server.url
        # The page itself is public; the data needs a token.
        with urllib.request.urlopen(url + "/", timeout=5) as r:
            page = r.read().decode()
            if "unipool" not in page or "Content-Security-Policy" not in r.headers:
                fail("GET / is not the dashboard with its security headers")
        browser.driver.get(url + "/")
        browser.find("#token")
        browser.shot("login")
        browser.no_errors("login")

        browser.sign_in(url, server.tokens["ops"])
        browser.find("#topology .cell")
        cards = browser.text_of("#summary")
        if "gpus allocated" not in cards.lower():
            fail("overview: no GPU summary: " + cards)
        browser.shot("overview")
        browser.no_errors("overview")
        # Zoom: the rack's groups, then one group's nodes.
        browser.click("#topology .cell")
        browser.until("a zoomed topology", lambda: "/" in browser.text_of(".crumbs"))
        browser.find("#topology .cell")
        browser.no_errors("overview zoomed")

        browser.go(url, "#/queues", "#queues tr td")
        if "team-a" not in browser.text_of("#queues"):
            fail("queues: team-a missing")
        browser.shot("queues")
        browser.no_errors("queues")

        # Colour by power: GPUs that report none (these are virtual) read grey.
        browser.go(url, "#/?color=power", "#topology .cell")
        if "no readings" not in browser.text_of("#topology"):
            fail("overview by power: no 'no readings' cell: " + browser.text_of("#topology"))
        browser.no_errors("overview by power")

        browser.go(url, "#/nodes", "#nodes tr td")
        nodes_text = browser.text_of("#nodes")
        if "dev-0" not in nodes_text:
            fail("nodes: dev-0 missing")
        job_cells = browser.driver.execute_script(
            "return [...document.querySelectorAll('#nodes td.jobs')].map((e) => e.textContent)")
        if "Jobs" not in nodes_text or not any(str(mine) in c.split(", ") for c in job_cells):
            fail(f"nodes: no jobs column with job {mine}: " + nodes_text)
        browser.shot("nodes")
        browser.no_errors("nodes")

        browser.go(url, "#/jobs", "#jobs tr td")
        if "alice-train" not in browser.text_of("#jobs") or "bob-secret" not in browser.text_of("#jobs"):
            fail("jobs: the admin sees every queue's jobs")
        browser.select("#filter-queue", "team-b")
        browser.until("the queue filter", lambda: "alice-train" not in browser.text_of("#jobs"))
        browser.shot("jobs")
        browser.no_errors("jobs")

        # Submit -> running -> cancel, through the UI.
        browser.go(url, "#/jobs", "#spec")
        browser.type_into("#spec", job_yaml("from-the-ui", "team-b", 8))
        browser.click("#dry-run")
        browser.until("the dry run", lambda: "valid" in browser.text_of("#submit-result"))
        browser.click("#submit")
        browser.until("the job page", lambda: "from-the-ui" in browser.text_of("h1"))
        browser.until("the job running", lambda: "Running" in browser.text_of(".toolbar .state"), 30)
        browser.find("#topology .cell.highlight")  # its placement, drawn
        browser.shot("job-running")
        browser.no_errors("job page")
        browser.click("#cancel")
        browser.driver.switch_to.alert.accept()
        browser.until("the job cancelled", lambda: "Cancelled" in browser.text_of(".toolbar .state"), 30)
        browser.no_errors("cancel")

        # A job's page with progress charts and its events.
        browser.go(url, f"#/jobs/{mine}", "#job-fields")
        browser.find("#charts svg[data-series=loss] path")
        browser.find("#events tr td")
        browser.find("#diagnosis p")  # its likely troubles, or that there are none
        browser.shot("job")
        browser.no_errors("job with progress")

        # The sim's report opens in it.
        report = os.path.join(work, "report.html")
        subprocess.run([args.binary, "sim", os.path.join(SOURCE, "examples/sims/llama3.yaml"),
                        "--report", report, "--no-progress"], check=True,
                       stdout=subprocess.DEVNULL, cwd=SOURCE)
        browser.go(url, "#/report", "#report-file")
        for _ in range(50):
            try:
                browser.find("#report-file").send_keys(report)
                break
            except StaleElementReferenceException:
                time.sleep(0.1)
        browser.until("the report shown", lambda: browser.find("#report").is_displayed())
        browser.driver.switch_to.frame(browser.find("#report"))
        if "svg" not in browser.driver.page_source:
            fail("the sim report has no charts in the dashboard")
        browser.driver.switch_to.default_content()
        browser.shot("report")
        browser.no_errors("sim report")

        # A tenant sees only its queues' jobs.
        browser.click("#logout")
        browser.sign_in(url, server.tokens["alice"])
        browser.go(url, "#/jobs", "#jobs tr td")
        listed = browser.text_of("#jobs")
        if "alice-train" not in listed:
            fail("tenant: its own job is not listed")
        if "bob-secret" in listed or "from-the-ui" in listed:
            fail("tenant: another tenant's job is listed: " + listed)
        browser.shot("tenant-jobs")
        browser.no_errors("tenant jobs")
        browser.go(url, f"#/jobs/{theirs}", "#banner")
        browser.until("the other tenant's job refused",
                      lambda: "not found" in browser.text_of("#banner"))
        if "bob-secret" in browser.driver.page_source:
            fail("tenant: another tenant's job is shown")
        browser.errors()  # (the 404 above is logged by the browser: expected)
        print(f"ui_test: ok; screenshots in {args.out}")
    finally:
        if browser:
            browser.quit()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
