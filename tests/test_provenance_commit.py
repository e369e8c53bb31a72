"""One git commit reader: the site's build record and a result bundle name the same commit."""

from __future__ import annotations

import subprocess

from gpulesson.results import provenance as results_provenance
from gpulesson.site import provenance as site_provenance
from tests.conftest import REPO


def test_the_build_record_names_the_commit_a_bundle_would():
    record = site_provenance.collect_build_record()
    sha = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    assert record.git_commit == results_provenance.package_commit()
    assert record.git_commit.removesuffix("+dirty") == sha


def test_outside_a_clone_the_bundle_says_none_and_the_record_unknown(tmp_path, monkeypatch):
    assert results_provenance.package_commit(tmp_path) is None
    monkeypatch.setattr(site_provenance, "package_commit", lambda: None)
    assert site_provenance.collect_build_record().git_commit == "unknown"


def test_the_site_keeps_no_copy_of_the_git_calls():
    source = (REPO / "gpulesson" / "site" / "provenance.py").read_text()
    assert "subprocess" not in source and "rev-parse" not in source
