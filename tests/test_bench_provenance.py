"""Bench provenance: the code's commit comes from git, or from a stamp on copies of a checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from localllm.bench.provenance import code_version

ROOT = Path(__file__).resolve().parents[1]


def test_stamped_commit_wins_over_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALLLM_GIT_COMMIT", "0123abcd+dirty")
    assert code_version()["git_commit"] == "0123abcd"
    assert code_version()["git_dirty"] is True
    monkeypatch.setenv("LOCALLLM_GIT_COMMIT", "0123abcd")
    assert code_version()["git_dirty"] is False


def test_checkout_commit_without_stamp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCALLLM_GIT_COMMIT", raising=False)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)  # fmt: skip
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert code_version()["git_commit"] == head.stdout.strip()


def test_stamp_script_writes_the_commit(tmp_path: Path) -> None:
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).returncode != 0:
        pytest.skip("not a git checkout")
    clone = tmp_path / "c"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    sha = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    subprocess.run(["bash", str(clone / "scripts/stamp_commit.sh")], check=True,
                   capture_output=True)  # fmt: skip
    assert (clone / ".carry/COMMIT").read_text().strip() == sha
    (clone / "README.md").write_text("changed\n")
    subprocess.run(["bash", str(clone / "scripts/stamp_commit.sh")], check=True,
                   capture_output=True)  # fmt: skip
    assert (clone / ".carry/COMMIT").read_text().strip() == sha + "+dirty"
