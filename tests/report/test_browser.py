"""A study's ``report.html`` and the codesign study's Optuna dashboard, opened in a real
browser: headless Chromium (Debian's ``chromium`` package; ``.ci/run`` installs it)
driven by Playwright (pip ``playwright``, the ``test`` extra) through ``executable_path``
-- no ``playwright install`` browser download.  Every image must have decoded
(``naturalWidth > 0``), the tables must be there, the console must show no error; a
screenshot of each page is saved in the test's tmp dir.

Skipped, saying why, only where no browser (or no Playwright) can be found."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _chromium() -> str | None:
    env = os.environ.get("DSE_CHROMIUM")
    if env and Path(env).is_file():
        return env
    for name in CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    return None


def _browser_or_skip():
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium found (apt-get install -y chromium, or set DSE_CHROMIUM); "
                    "the browser test needs a real browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed (pip install '.[test]')")
    return exe, sync_playwright


def small_layout_study(tmp_path: Path) -> Path:
    """studies/llama70b.toml on 16 and 32 A100s at one sequence length (a few seconds)."""
    text = (ROOT / "studies" / "llama70b.toml").read_text()
    text = re.sub(r"^seq_len = \[.*\]$", "seq_len = [4096]", text, flags=re.M)
    text = re.sub(r"^gpus = \[.*\]$", "gpus = [16, 32]", text, flags=re.M)
    text = re.sub(r'^hardware = \[.*\]$', 'hardware = ["a100-sxm-80gb"]', text, flags=re.M)
    text = re.sub(r"^heatmap = .*$", 'heatmap = { hardware = "a100-sxm-80gb", gpus = 32, seq_len = 4096 }',
                  text, flags=re.M)
    text = re.sub(r"^breakdown = .*$",
                  'breakdown = { hardware = "a100-sxm-80gb", gpus = 32, seq_len = 4096, top = 4 }',
                  text, flags=re.M)
    p = tmp_path / "llama70b.toml"
    p.write_text(text)
    return p


def _check_page(page, url: str, shot: Path, wait_for: str | None = None) -> dict:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(url, wait_until="load")
    if wait_for:
        page.wait_for_selector(wait_for, timeout=30_000)
    page.wait_for_load_state("networkidle")
    imgs = page.eval_on_selector_all(
        "img", "els => els.map(e => ({src: e.src.slice(0, 40), ok: e.complete && e.naturalWidth > 0}))")
    tables = page.eval_on_selector_all("table", "els => els.map(t => t.rows.length)")
    page.screenshot(path=str(shot), full_page=True)
    return {"errors": errors, "imgs": imgs, "tables": tables}


def test_report_html_renders_in_chromium(tmp_path, monkeypatch):
    exe, sync_playwright = _browser_or_skip()
    from dse.study import run_study
    study = small_layout_study(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = Path(run_study(str(study)))
    html = out / "report.html"
    assert html.is_file()
    text = html.read_text()
    assert "src=\"data:image/png;base64," in text
    assert not re.search(r'src="(?!data:)', text), "report.html must not reference outside files"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            res = _check_page(page, html.resolve().as_uri(), tmp_path / "report.png")
        finally:
            browser.close()
    assert not res["errors"], res["errors"]
    md_imgs = len(re.findall(r"!\[[^\]]*\]\([^)]+\)", (out / "report.md").read_text()))
    assert len(res["imgs"]) == md_imgs >= 4, res["imgs"]
    assert all(i["ok"] for i in res["imgs"]), res["imgs"]
    assert len(res["tables"]) >= 1 and all(n >= 2 for n in res["tables"]), res["tables"]
    assert (tmp_path / "report.png").stat().st_size > 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"dashboard exited with {proc.returncode}: {proc.stdout.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"dashboard did not listen on port {port} in {timeout} s")


def test_codesign_dashboard_renders_in_chromium(tmp_path):
    exe, sync_playwright = _browser_or_skip()
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{tmp_path / 'codesign.db'}"
    st = optuna.create_study(study_name="codesign", storage=url, directions=["minimize", "minimize"])
    st.optimize(lambda t: (t.suggest_float("hbm_bw", 1, 4) ** -1, t.suggest_float("clock", 1, 2)),
                n_trials=5)
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "dse.cli", "dashboard", "codesign", "--storage", url,
                             "--host", "127.0.0.1", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_port(port, proc)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                res = _check_page(page, f"http://127.0.0.1:{port}/dashboard", tmp_path / "dashboard.png",
                                  wait_for="text=codesign")
                page.click("text=codesign")
                page.wait_for_load_state("networkidle")
                # the study page has drawn its trials: >= 5 markers in the plotly plots
                page.wait_for_function(
                    "document.querySelectorAll('.js-plotly-plot .point').length >= 5", timeout=30_000)
                page.screenshot(path=str(tmp_path / "dashboard_study.png"), full_page=True)
                body = page.inner_text("body")
                errors_after = list(res["errors"])
            finally:
                browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert not res["errors"], res["errors"]
    assert all(i["ok"] for i in res["imgs"]), res["imgs"]
    assert "codesign" in body
    assert not errors_after, errors_after
    assert (tmp_path / "dashboard.png").stat().st_size > 5_000


def test_results_report_html_renders_in_chromium(tmp_path):
    """The ``results/<name>/report.html`` that ``make study`` wrote in this checkout (they
    are untracked), e.g. results/llama70b/report.html."""
    exe, sync_playwright = _browser_or_skip()
    pages = sorted((ROOT / "results").glob("*/report.html"))
    if not pages:
        pytest.skip("no results/<name>/report.html here yet (run `make study STUDY=llama70b`)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            for html in pages:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                res = _check_page(page, html.as_uri(), tmp_path / f"{html.parent.name}.png")
                page.close()
                assert not res["errors"], (html, res["errors"])
                assert all(i["ok"] for i in res["imgs"]), (html, res["imgs"])
                assert res["tables"], html
        finally:
            browser.close()
