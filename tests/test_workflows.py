"""The GitHub workflows keep their safety rules; a broken rule names the file and job.

The self-hosted GPU runner must never run code from a pull request: only the
publish workflow's measure and build jobs ask for it, a workflow with a
self-hosted job may only be triggered by push, schedule or workflow_dispatch, and
each such job carries a guard on repository, ref and event. (A pull request's own
edited copy of ci.yml is beyond any check here; CONTRIBUTING.md says what
protects the runner from it.) Every action is pinned to a commit with its version in a comment, the
token starts with no permissions, checkouts do not keep credentials, and
zizmor (offline) finds nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

WORKFLOW_DIR = REPO / ".github" / "workflows"
WORKFLOWS = sorted([*WORKFLOW_DIR.glob("*.yml"), *WORKFLOW_DIR.glob("*.yaml")])
REPOSITORY = "gpulesson/gpulesson"
MAIN_REF = "refs/heads/main"

#: The only triggers a workflow with a self-hosted job may have: none of them
#: can be fired by someone without write access to the repository.
SELF_HOSTED_TRIGGERS = frozenset({"push", "schedule", "workflow_dispatch"})
#: Triggers that run (or hand data from) code written by someone outside the project.
FORK_EVENTS = frozenset(
    {
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
        "issue_comment",
        "issues",
        "discussion",
        "discussion_comment",
        "workflow_run",
        "merge_group",
    }
)
_HOSTED_LABEL = re.compile(r"^(ubuntu|windows|macos)-(latest|\d[\w.-]*)$")
_PINNED_USES = re.compile(
    r"^\s*(?:-\s+)?uses:\s*(?P<ref>[\w.-]+/[\w./-]+)@(?P<sha>[0-9a-f]{40})\s+#\s*v\d+(\.\d+)*\s*$"
)
_USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:")


def load(text: str) -> dict[str, Any]:
    """A workflow as a dict, with the ``on`` key under "on" (YAML 1.1 reads it as True).

    >>> sorted(load("on: [push]\\njobs: {}\\n"))
    ['jobs', 'on']
    """
    document = yaml.safe_load(text)
    if True in document:
        document["on"] = document.pop(True)
    return document


def triggers(workflow: dict[str, Any]) -> set[str]:
    """The event names a workflow runs on, whichever YAML shape ``on`` has.

    >>> sorted(triggers(load("on:\\n  push:\\n  schedule:\\n    - cron: '0 0 * * 1'\\n")))
    ['push', 'schedule']
    >>> triggers(load("on: pull_request\\n"))
    {'pull_request'}
    """
    on = workflow.get("on")
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return set(on)
    if isinstance(on, dict):
        return set(on)
    return set()


def is_self_hosted(runs_on: Any) -> bool:
    """True unless every runner label is a GitHub-hosted image (unknown counts as self-hosted).

    >>> is_self_hosted("ubuntu-latest"), is_self_hosted(["self-hosted", "linux", "gpu"])
    (False, True)
    >>> is_self_hosted("${{ matrix.runner }}"), is_self_hosted({"group": "gpus"})
    (True, True)
    """
    labels = [runs_on] if isinstance(runs_on, str) else runs_on
    if not isinstance(labels, list) or not labels:
        return True
    return not all(isinstance(label, str) and _HOSTED_LABEL.match(label) for label in labels)


def guard_problems(condition: Any) -> list[str]:
    """What a self-hosted job's ``if:`` lacks to act as a second gate.

    The guard must be a plain conjunction (no ``||``, no ``!``) that includes the
    repository, the main ref and an allow-list of events drawn from
    SELF_HOSTED_TRIGGERS.

    >>> guard_problems("github.repository == 'gpulesson/gpulesson' && "
    ...     "github.ref == 'refs/heads/main' && "
    ...     "contains(fromJSON('[\\"push\\", \\"schedule\\"]'), github.event_name)")
    []
    >>> guard_problems("github.ref == 'refs/heads/main' || true")
    ["the guard has '||' or '!', so it can be true without its clauses"]
    """
    if not isinstance(condition, str):
        return [f"no job-level `if:` guard (found {condition!r})"]
    text = " ".join(condition.replace("${{", " ").replace("}}", " ").split())
    if "||" in text or re.search(r"!(?!=)", text):
        return ["the guard has '||' or '!', so it can be true without its clauses"]
    clauses = [clause.strip() for clause in text.split("&&")]
    problems = []
    if f"github.repository == '{REPOSITORY}'" not in clauses:
        problems.append(f"the guard does not require github.repository == '{REPOSITORY}'")
    if f"github.ref == '{MAIN_REF}'" not in clauses:
        problems.append(f"the guard does not require github.ref == '{MAIN_REF}'")
    events: set[str] = set()
    for clause in clauses:
        listed = re.fullmatch(r"contains\(fromJSON\('(\[.*\])'\), github\.event_name\)", clause)
        single = re.fullmatch(r"github\.event_name == '(\w+)'", clause)
        if listed:
            events.update(json.loads(listed.group(1)))
        elif single:
            events.add(single.group(1))
    if not events:
        problems.append("the guard does not list the events it allows (github.event_name)")
    elif not events <= SELF_HOSTED_TRIGGERS:
        problems.append(f"the guard allows {sorted(events - SELF_HOSTED_TRIGGERS)}")
    return problems


def self_hosted_problems(workflow: dict[str, Any]) -> list[str]:
    """Ways a self-hosted job in this workflow could run code from outside the project."""
    hosted_jobs = [
        name
        for name, job in workflow.get("jobs", {}).items()
        if "uses" not in job and is_self_hosted(job.get("runs-on"))
    ]
    if not hosted_jobs:
        return []
    problems = []
    events = triggers(workflow)
    for event in sorted(events - SELF_HOSTED_TRIGGERS):
        kind = "a fork-reachable" if event in FORK_EVENTS else "a not-allowed"
        problems.append(f"{kind} trigger {event!r} in a workflow with self-hosted jobs")
    on = workflow.get("on")
    if "push" in events and isinstance(on, dict):
        branches = (on.get("push") or {}).get("branches")
        if branches != ["main"]:
            problems.append(f"push must be limited to branches: [main], not {branches!r}")
    for name in hosted_jobs:
        problems += [f"job {name!r}: {p}" for p in guard_problems(workflow["jobs"][name].get("if"))]
    return problems


def _workflows() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, load(path.read_text(encoding="utf-8"))) for path in WORKFLOWS]


def _steps(workflow: dict[str, Any]):
    for job_name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


def test_the_workflows_exist():
    assert {path.name for path in WORKFLOWS} >= {"ci.yml", "publish.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_self_hosted_job_is_reachable_from_a_fork(path: Path):
    problems = self_hosted_problems(load(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


GUARD = (
    "github.repository == 'gpulesson/gpulesson' && github.ref == 'refs/heads/main' && "
    """contains(fromJSON('["push", "schedule", "workflow_dispatch"]'), github.event_name)"""
)


def _synthetic(on: str, runs_on: str = "[self-hosted, linux, gpu]", guard: str = GUARD) -> str:
    return (
        f"on: {on}\njobs:\n  build:\n    if: {json.dumps(guard)}\n"
        f"    runs-on: {runs_on}\n    steps: []\n"
    )


def test_the_checker_accepts_the_safe_shape():
    assert self_hosted_problems(load(_synthetic("{push: {branches: [main]}, schedule: []}"))) == []


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("[push, pull_request]", "a fork-reachable trigger 'pull_request'"),
        ("[push, pull_request_target]", "a fork-reachable trigger 'pull_request_target'"),
        ("{issue_comment: {types: [created]}}", "a fork-reachable trigger 'issue_comment'"),
        ("{workflow_run: {workflows: [CI]}}", "a fork-reachable trigger 'workflow_run'"),
        ("workflow_call", "a not-allowed trigger 'workflow_call'"),
        ("{push: {branches: ['**']}}", "push must be limited to branches: [main]"),
    ],
)
def test_the_checker_rejects_fork_triggers_on_self_hosted_jobs(on: str, expected: str):
    problems = self_hosted_problems(load(_synthetic(on)))
    assert any(problem.startswith(expected) for problem in problems), problems


def test_the_checker_treats_unknown_runners_as_self_hosted():
    on = "[push, pull_request]"
    assert self_hosted_problems(load(_synthetic(on, runs_on="ubuntu-latest"))) == []
    assert self_hosted_problems(load(_synthetic(on, runs_on="'${{ inputs.runner }}'")))


@pytest.mark.parametrize(
    ("guard", "expected"),
    [
        ("true", "does not require github.repository"),
        (GUARD.replace("refs/heads/main", "refs/heads/dev"), "does not require github.ref"),
        (GUARD + " || github.event_name == 'pull_request'", "'||' or '!'"),
        ("!(" + GUARD + ")", "'||' or '!'"),
        (GUARD.replace('"schedule"', '"pull_request"'), "the guard allows ['pull_request']"),
        (GUARD.split(" && contains")[0], "does not list the events"),
    ],
)
def test_the_checker_rejects_weak_guards(guard: str, expected: str):
    problems = self_hosted_problems(load(_synthetic("[push]", guard=guard)))
    assert any(expected in problem for problem in problems), problems


# --- the publish workflow: a fleet of GPU runners, a build on the GPU, a refresh PR -----------

PUBLISH = WORKFLOW_DIR / "publish.yml"
RUNNERS_CONFIG = REPO / ".github" / "gpu-runners.json"


def _publish() -> dict[str, Any]:
    return load(PUBLISH.read_text(encoding="utf-8"))


def _run_of(job: dict[str, Any], needle: str) -> str:
    (run,) = [s["run"] for s in job["steps"] if needle in s.get("run", "")]
    return run


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _plan(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The plan job's script, run on ``config`` as .github/gpu-runners.json."""
    (tmp_path / ".github").mkdir(exist_ok=True)
    (tmp_path / ".github" / "gpu-runners.json").write_text(json.dumps(config))
    output = tmp_path / "github_output"
    output.write_text("")
    script = _run_of(_publish()["jobs"]["plan"], "gpu-runners.json")
    return _bash(script, tmp_path, GITHUB_OUTPUT=str(output))


def test_the_runner_config_lists_todays_gpu_runner_with_self_hosted_labels():
    config = json.loads(RUNNERS_CONFIG.read_text(encoding="utf-8"))
    runners = config["runners"]
    assert runners and len({r["name"] for r in runners}) == len(runners)
    for runner in runners:
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", runner["name"]), runner  # names a file
        assert runner["labels"][0] == "self-hosted" and is_self_hosted(runner["labels"])
    # the one runner the project has today (publish.yml built on it before the fleet)
    assert ["self-hosted", "linux", "gpu"] in [r["labels"] for r in runners]
    assert isinstance(config["queue_minutes"], int) and 0 < config["queue_minutes"] <= 120


def test_the_measure_matrix_is_the_runner_config(tmp_path: Path):
    config = json.loads(RUNNERS_CONFIG.read_text(encoding="utf-8"))
    result = _plan(config, tmp_path)
    assert result.returncode == 0, result.stderr
    outputs = dict(
        line.split("=", 1) for line in (tmp_path / "github_output").read_text().splitlines()
    )
    assert json.loads(outputs["runners"]) == config["runners"]
    assert int(outputs["queue_minutes"]) == config["queue_minutes"]
    jobs = _publish()["jobs"]
    assert jobs["plan"]["outputs"]["runners"] == "${{ steps.read.outputs.runners }}"
    measure = jobs["measure"]
    assert measure["needs"] == "plan"
    assert measure["strategy"]["matrix"] == {
        "runner": "${{ fromJSON(needs.plan.outputs.runners) }}"
    }
    assert measure["runs-on"] == "${{ matrix.runner.labels }}"
    assert not is_self_hosted(jobs["plan"]["runs-on"])


@pytest.mark.parametrize(
    ("runners", "problem"),
    [
        ([], "lists no runner"),
        ([{"name": "gpu", "labels": ["ubuntu-latest"]}], "AssertionError"),
        ([{"name": "a", "labels": ["self-hosted"]}] * 2, "runner names repeat"),
    ],
)
def test_a_bad_runner_config_stops_the_plan(tmp_path: Path, runners, problem):
    result = _plan({"queue_minutes": 5, "runners": runners}, tmp_path)
    assert result.returncode != 0 and problem in result.stderr


def test_each_runner_measures_with_a_timeout_and_uploads_its_bundle_without_stopping_others():
    measure = _publish()["jobs"]["measure"]
    assert measure["strategy"]["fail-fast"] is False
    assert measure["continue-on-error"] is True
    assert 0 < measure["timeout-minutes"] <= 60
    assert measure["permissions"] == {"contents": "read"}
    run = _run_of(measure, "gpulesson measure")
    assert "--device cuda" in run and '--out "bundle/$RUNNER_NAME-' in run
    assert measure["env"]["RUNNER_NAME"] == "${{ matrix.runner.name }}"
    assert "gpulesson compare bundle/" in _run_of(measure, "gpulesson compare")
    (upload,) = [s for s in measure["steps"] if s.get("uses", "").startswith("actions/upload-")]
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["with"]["name"] == "bundle-${{ matrix.runner.name }}"
    assert upload["with"]["if-no-files-found"] == "error"


def test_the_site_is_built_on_the_first_gpu_runner_and_stops_off_cuda(tmp_path: Path):
    jobs = _publish()["jobs"]
    build = jobs["build"]
    assert build["needs"] == "plan"
    assert " ".join(build["if"].split()) == GUARD
    assert build["runs-on"] == "${{ fromJSON(needs.plan.outputs.builder).labels }}"
    assert build["env"]["GPULESSON_REQUIRE_DEVICE"] == "cuda"  # and failing claims stop it
    assert build["env"]["GPULESSON_FRESH"] == "1"
    assert build["permissions"] == {"contents": "read"}
    builds = [s["run"] for s in build["steps"] if "mkdocs build" in s.get("run", "")]
    assert builds == [".venv/bin/mkdocs build --strict -d site"]
    config = json.loads(RUNNERS_CONFIG.read_text(encoding="utf-8"))
    assert _plan(config, tmp_path).returncode == 0
    outputs = dict(
        line.split("=", 1) for line in (tmp_path / "github_output").read_text().splitlines()
    )
    assert json.loads(outputs["builder"]) == config["runners"][0]


def test_no_job_waits_forever_on_a_missing_runner():
    jobs = _publish()["jobs"]
    # a job's timeout does not count its wait for a runner: queue-deadline ends that wait
    deadline = jobs["queue-deadline"]
    assert deadline["needs"] == "plan" and not is_self_hosted(deadline["runs-on"])
    assert deadline["permissions"] == {"actions": "write"}
    assert deadline["env"]["QUEUE_MINUTES"] == "${{ needs.plan.outputs.queue_minutes }}"
    script = deadline["steps"][0]["run"]
    assert 'startswith("measure on ")' in script and jobs["measure"]["name"].startswith(
        "measure on "
    )
    assert 'startswith("build the site on ")' in script
    assert jobs["build"]["name"].startswith("build the site on ")
    assert 'gh run cancel "$RUN_ID"' in script
    config = json.loads(RUNNERS_CONFIG.read_text(encoding="utf-8"))
    slowest = max(jobs["measure"]["timeout-minutes"], jobs["build"]["timeout-minutes"])
    assert deadline["timeout-minutes"] >= config["queue_minutes"] + slowest


def _bundle(runner: str, day: str) -> str:
    return f"{runner}-{day}.json"


def test_the_refresh_collects_each_new_bundle_in_place_of_its_runners_older_one(tmp_path: Path):
    script = _run_of(_publish()["jobs"]["refresh-pr"], "new-bundles/")
    reference = tmp_path / "results" / "reference"
    reference.mkdir(parents=True)
    for name in ("gpu-2025-01-06.json", "gpu-a100-2025-01-06.json", "rtx-4090-2024-12-01.json"):
        (reference / name).write_text("old")
    (tmp_path / "new-bundles").mkdir()
    (tmp_path / "new-bundles" / "gpu-2025-02-03.json").write_text("new")
    result = _bash(script, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in reference.iterdir()) == [
        "gpu-2025-02-03.json",  # replaced gpu-2025-01-06.json, not gpu-a100's
        "gpu-a100-2025-01-06.json",
        "rtx-4090-2024-12-01.json",
    ]
    assert (reference / "gpu-2025-02-03.json").read_text() == "new"
    (tmp_path / "new-bundles" / "gpu-2025-02-03.json").unlink()
    assert _bash(script, tmp_path).returncode == 0  # no runner measured: nothing changes
    assert len(list(reference.iterdir())) == 3


def test_deploy_publishes_the_build_with_pages_rights_only():
    deploy = _publish()["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["if"] == "always() && needs.build.result == 'success'"
    assert not is_self_hosted(deploy["runs-on"])
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert triggers(_publish()) == {"push", "schedule", "workflow_dispatch"}


def test_the_scheduled_run_opens_a_pull_request_refreshing_the_reference_bundles():
    workflow = _publish()
    assert workflow["on"]["schedule"], "a weekly run refreshes the bundles"
    refresh = workflow["jobs"]["refresh-pr"]
    assert set(refresh["needs"]) == {"plan", "measure"}
    condition = " ".join(refresh["if"].split())
    assert condition.startswith("always() && needs.plan.result == 'success' && (")
    assert "github.event_name == 'schedule'" in condition
    assert not is_self_hosted(refresh["runs-on"])
    assert refresh["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "actions": "read",
    }
    (pr,) = [s for s in refresh["steps"] if "create-pull-request" in s.get("uses", "")]
    assert pr["uses"].startswith("peter-evans/create-pull-request@")
    assert pr["with"]["add-paths"] == "results/reference/*.json"
    (download,) = [s for s in refresh["steps"] if "download-artifact" in s.get("uses", "")]
    assert download["with"]["pattern"] == "bundle-*" and download["continue-on-error"] is True


def fork_reachable_jobs(workflow: dict[str, Any]) -> list[str]:
    """Jobs that could run when the repository, ref or event guard fails (a fork's copy).

    A job is safe when its own ``if:`` is the guard, or when it needs a safe job and does not
    override a skipped need: ``always()`` runs a job whose needs were skipped, so with it the
    condition must also require a safe need's success.

    >>> jobs = {"a": {"if": GUARD}, "b": {"needs": "a"}, "c": {"needs": "a", "if": "always()"}}
    >>> fork_reachable_jobs({"jobs": jobs})
    ['c']
    """
    jobs = workflow["jobs"]
    safe: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, job in jobs.items():
            if name in safe:
                continue
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            condition = " ".join(str(job.get("if", "")).split())
            if not guard_problems(job.get("if")):
                ok = True
            elif "always()" in condition or "!cancelled()" in condition:
                ok = any(f"needs.{n}.result == 'success'" in condition for n in safe & set(needs))
            else:
                ok = bool(set(needs) & safe)
            if ok:
                safe.add(name)
                changed = True
    return sorted(set(jobs) - safe)


def test_no_publish_job_runs_in_a_fork():
    assert fork_reachable_jobs(_publish()) == []
    jobs = _publish()["jobs"]
    assert not guard_problems(jobs["plan"]["if"]) and not guard_problems(jobs["measure"]["if"])


#: The only jobs in the project's workflows that may ask for a self-hosted runner.
GATED_GPU_JOBS = frozenset({("publish.yml", "measure"), ("publish.yml", "build")})


def test_only_the_publish_workflows_gated_jobs_use_a_self_hosted_runner():
    """ci.yml runs on pull requests: none of its jobs, nor any other file's, may ask for the GPU.

    (A fork can still edit its copy of ci.yml; CONTRIBUTING.md says what protects the
    runner then. This keeps the project's own files from ever opening that door.)
    """
    self_hosted = set()
    for name, workflow in _workflows():
        for job_name, job in workflow["jobs"].items():
            # a call to a reusable workflow could hide a self-hosted job from this check
            assert "uses" not in job, f"{name}: job {job_name!r} calls a reusable workflow"
            if is_self_hosted(job.get("runs-on")):
                self_hosted.add((name, job_name))
    assert self_hosted == GATED_GPU_JOBS
    jobs = _publish()["jobs"]
    for _, job_name in sorted(GATED_GPU_JOBS):
        assert guard_problems(jobs[job_name].get("if")) == [], job_name
    assert "pull_request" in triggers(load((WORKFLOW_DIR / "ci.yml").read_text(encoding="utf-8")))


def test_the_docs_say_what_protects_the_runner_from_an_edited_workflow():
    """The job guards cannot stop a pull request that edits ci.yml: both places say what does."""
    header = PUBLISH.read_text(encoding="utf-8").split("\nname:", 1)[0]
    contributing = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = contributing.split("### Keeping a stranger's pull request off the GPU machine")[1]
    section = section.split("\n## ")[0]
    for text, where in ((header, "publish.yml's header"), (section, "CONTRIBUTING.md")):
        flat = " ".join(text.replace("#", " ").split())
        assert "runs-on: [self-hosted, linux, gpu]" in flat, where  # the attack, named
        assert "Approval for running fork pull request workflows from contributors" in flat
        assert "all outside collaborators" in flat, where
        assert "--ephemeral" in flat, where
        assert "forks cannot" in flat, where  # a repository forks cannot open PRs against
        assert "docs.github.com" in flat, where  # cited
    assert "a fork's copy of the workflow never runs it" not in contributing


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"\*\*Run the full test suite\*\*.*?```bash\n(.+?)\n```", readme, re.S)
    assert match, "README.md lost its 'Run the full test suite' command"
    ci = load((WORKFLOW_DIR / "ci.yml").read_text(encoding="utf-8"))
    runs = [step.get("run", "").strip() for _, step in _steps(ci)]
    assert match.group(1).strip() in runs


FAST_LOOP = 'pytest -m "not browser and not site and not notebooks"'


def test_ci_runs_the_fast_tests_with_the_cuda_build_of_torch_on_a_gpu_less_runner():
    """The README's install, torch straight from PyPI, so stderr checks meet the CUDA build."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"\*\*Run the full test suite\*\*.*?```bash\n(.+?)\n```", readme, re.S)
    assert match, "README.md lost its 'Run the full test suite' command"
    install = match.group(1).strip().removesuffix("&& pytest").strip()
    ci = load((WORKFLOW_DIR / "ci.yml").read_text(encoding="utf-8"))
    job = ci["jobs"]["cuda-wheel"]
    assert not is_self_hosted(job["runs-on"]), "the CUDA-wheel job runs where there is no GPU"
    assert job.get("env", {}).get("CUDA_HOME"), "name a CUDA toolkit, so torch warns as it can"
    runs = [step.get("run", "") for step in job["steps"]]
    assert install in [run.strip() for run in runs], f"the job must install with: {install}"
    assert not any("index-url" in run or "TORCH_INDEX_URL" in run or "+cpu" in run for run in runs)
    assert any("torch.version.cuda" in run for run in runs), "check that torch is the CUDA build"
    assert any(FAST_LOOP in run for run in runs)
    contributing = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert FAST_LOOP in contributing, "CONTRIBUTING.md names the fast loop CI runs"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_version(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    uses = [line for line in lines if _USES_LINE.match(line)]
    unpinned = [line.strip() for line in uses if not _PINNED_USES.match(line)]
    assert not unpinned, f"{path.name}: pin to owner/repo@<40-hex sha> # vX.Y.Z:\n" + "\n".join(
        unpinned
    )
    in_yaml = [step["uses"] for _, step in _steps(load("\n".join(lines))) if "uses" in step]
    assert len(in_yaml) == len(uses), f"{path.name}: a `uses:` this check cannot see"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_permissions_start_empty_and_each_job_asks_for_its_own(path: Path):
    workflow = load(path.read_text(encoding="utf-8"))
    top = workflow.get("permissions")
    assert top == {} or (isinstance(top, dict) and set(top.values()) <= {"read", "none"}), (
        f"{path.name}: top-level permissions must be {{}} or read-only, not {top!r}"
    )
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"{path.name}: job {name!r}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_jobs_have_timeouts_checkouts_keep_no_credentials_and_runs_have_no_expressions(
    path: Path,
):
    workflow = load(path.read_text(encoding="utf-8"))
    assert "concurrency" in workflow, f"{path.name}: no concurrency group"
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}: job {name!r}"
    for name, step in _steps(workflow):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, (path.name, name)
        assert "${{" not in step.get("run", ""), f"{path.name}: job {name!r}: pass it via env:"


def _zizmor() -> str | None:
    found = shutil.which("zizmor")
    beside_python = Path(sys.executable).parent / "zizmor"
    return found or (str(beside_python) if beside_python.exists() else None)


def test_zizmor_offline_finds_nothing():
    zizmor = _zizmor()
    if zizmor is None:
        pytest.skip("zizmor is not installed; pip install -e '.[dev]' brings it")
    result = subprocess.run(
        [zizmor, "--offline", "--format", "json", str(WORKFLOW_DIR)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    findings = json.loads(result.stdout or "[]")
    described = [f"{f['ident']}: {f['desc']}" for f in findings]
    assert result.returncode == 0 and not findings, "\n".join(described) or result.stderr


# --- the publish workflow installs pinned versions (.github/constraints.txt) ---------------

CONSTRAINTS = REPO / ".github" / "constraints.txt"
CONSTRAINTS_PYTHON = "3.11"


def _constraint_pins() -> dict[str, str]:
    """NAME==VERSION lines of .github/constraints.txt, by canonical name."""
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for raw in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version.strip(), f".github/constraints.txt: {raw!r} is not NAME==VERSION"
        key = canonicalize_name(name.strip())
        assert key not in pins, f".github/constraints.txt pins {name} twice"
        pins[key] = version.strip()
    return pins


def _project_requirements() -> list[Any]:
    """gpulesson's own requirements and its dev extra's, from pyproject.toml."""
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = project["dependencies"] + project["optional-dependencies"]["dev"]
    return [Requirement(text) for text in names]


def _needed_here(pins: dict[str, str]) -> set[str]:
    """Every distribution gpulesson[dev] needs on this machine, following installed metadata.

    A distribution installed at another version than ``pins`` names (an install without the
    constraints, where pip took a newer release) is counted, but its requirements are not
    followed: they are that release's, not the pinned one's.
    """
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    needed: set[str] = set()
    todo = [(req, frozenset()) for req in _project_requirements()]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, asked = todo.pop()
        if req.marker is not None and not any(
            req.marker.evaluate({"extra": extra}) for extra in (asked or {""})
        ):
            continue
        name, extras = canonicalize_name(req.name), frozenset(req.extras)
        needed.add(name)
        if (name, extras) in done:
            continue
        done.add((name, extras))
        if name in _PINNED_BY_THEIR_PARENT:
            continue
        try:
            installed = distribution(req.name)
        except PackageNotFoundError:
            continue
        if pins.get(name, installed.version) != installed.version:
            continue
        requires = installed.requires or []
        todo += [(Requirement(text), extras) for text in requires]
    return needed


# torch's wheel pins the CUDA libraries it was built with (nvidia-*, cuda-toolkit, triton) in
# its own metadata, and which of them it needs depends on the wheel (the CPU wheel needs none,
# the CUDA wheel a dozen): pinning torch pins them, so they are not listed one by one.
_PINNED_BY_THEIR_PARENT = frozenset({"torch"})


def test_publish_installs_the_pinned_versions_with_their_python():
    jobs = _publish()["jobs"]
    installing = {
        name: [s["run"] for s in job["steps"] if "pip install" in s.get("run", "")]
        for name, job in jobs.items()
    }
    assert installing["measure"] and installing["build"], "publish.yml installs nothing?"
    for name, runs in installing.items():
        for run in runs:
            for line in run.splitlines():
                if "pip install" in line:
                    assert "--constraint .github/constraints.txt" in line, f"{name}: {line!r}"
        pythons = [
            str(step.get("with", {}).get("python-version"))
            for step in jobs[name]["steps"]
            if step.get("uses", "").startswith("actions/setup-python@")
        ]
        if runs:
            assert pythons == [CONSTRAINTS_PYTHON], f"{name}: the constraints' Python"
    assert f"CPython {CONSTRAINTS_PYTHON}" in CONSTRAINTS.read_text(encoding="utf-8")


def test_the_constraints_pin_every_package_gpulesson_dev_needs():
    pins = _constraint_pins()
    missing = sorted(_needed_here(pins) - set(pins))
    assert not missing, (
        "add to .github/constraints.txt (the version from `pip freeze` in a venv where the "
        "tests pass): " + ", ".join(missing)
    )
    from packaging.utils import canonicalize_name

    for req in _project_requirements():
        version = pins[canonicalize_name(req.name)]
        assert req.specifier.contains(version, prereleases=True), (
            f".github/constraints.txt pins {req.name}=={version}, outside pyproject's {req}"
        )
    local = sorted(f"{name}=={v}" for name, v in pins.items() if "+" in v)
    assert not local, f"local builds are not on PyPI; pin the plain version: {local}"
