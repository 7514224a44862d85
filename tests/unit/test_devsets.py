"""The dev sets shipped in eval/devsets/: pinned, hash-checked, the quick set inside the ten, and
none of RepoEval's own repositories (tuning there would leak into the benchmark)."""

from __future__ import annotations

from pathlib import Path

from repomem.evaluation.build import DevSet, load_devset, shipped_devset

# RepoCoder's RepoEval repositories (line, API and function splits).
REPOEVAL = {"diffusers", "evaluate", "nerfstudio", "fortuna", "vizier", "federatedscope", "rl", "ace",
            "trlx", "imagen", "lucidrains", "redis", "deepmind", "huggingface"}


def shipped(name: str) -> DevSet:
    path = shipped_devset(name)
    assert path is not None, name
    devset = load_devset(path)
    assert isinstance(devset, DevSet), devset
    return devset


def test_the_shipped_dev_sets_are_pinned_and_hash_checked():
    for name in ("quick", "ten"):
        devset = shipped(name)
        for repo in devset.repos:
            package, _, version = repo.requirement.partition("==")
            assert package and version and repo.sha256 is not None and len(repo.sha256) == 64, repo
            assert repo.name.lower() not in REPOEVAL and package.lower() not in REPOEVAL, repo


def test_the_ten_repository_set_holds_the_quick_set_and_seven_more_under_one_protocol():
    quick, ten = shipped("quick"), shipped("ten")
    assert set(quick.repos) <= set(ten.repos)
    assert len(ten.repos) >= 10 and len(set(ten.repos) - set(quick.repos)) >= 7
    assert (quick.seed, quick.tasks_per_repo, quick.splits) == (ten.seed, ten.tasks_per_repo, ten.splits)


def test_a_dev_set_is_named_or_given_as_a_file(tmp_path: Path):
    assert shipped_devset("../quick") is None and shipped_devset("nonexistent") is None
    bad = tmp_path / "devset.toml"
    bad.write_text('seed = 1\ntasks_per_repo = 2\nsplits = ["line"]\n'
                   '[[repo]]\nname = "x"\nrequirement = "x==1"\nsha256 = "not-a-hash"\n')
    failure = load_devset(bad)
    assert not isinstance(failure, DevSet) and "sha256" in failure.message
