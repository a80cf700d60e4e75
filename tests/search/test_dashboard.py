"""The dashboard serves a finished study over HTTP."""

from __future__ import annotations

import json
import urllib.request

from dse.search import dashboard
from dse.search.runner import run_search

from . import toy_objective as toy


def test_dashboard_answers_http_200_for_a_finished_study(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    run_search("toy-dash", url, toy.SPACE, toy.evaluate_batch, toy.DIRECTIONS, 6,
               batch_size=3, seed=0, progress=False, heartbeat_interval_s=1)
    proc, page = dashboard.start(url, timeout_s=20)
    try:
        with urllib.request.urlopen(page, timeout=5) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
        api = page.replace("/dashboard", "/api/studies")
        with urllib.request.urlopen(api, timeout=5) as r:
            studies = json.load(r)["study_summaries"]
        assert [s["study_name"] for s in studies] == ["toy-dash"]
    finally:
        dashboard.stop(proc)
    assert proc.poll() is not None
