"""The dev sets shipped in eval/devsets/: pinned, hash-checked, the quick set inside the ten, and
none of RepoEval's own repositories (tuning there would leak into the benchmark)."""

from __future__ import annotations

from pathlib import Path

from repomem.evaluation.build import DEVSETS, DevSet, load_devset, shipped_devset

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
    names = sorted(path.stem for path in DEVSETS.glob("*.toml"))
    assert {"quick", "ten", "go", "rust", "typescript"} <= set(names)
    for name in names:
        devset = shipped(name)
        for repo in devset.repos:
            assert repo.sha256 is not None and len(repo.sha256) == 64, repo
            if repo.source == "pypi":
                package, _, version = repo.requirement.partition("==")
            else:  # npm: name@version (a scope's @ first), deb / debsrc: name=version
                package, _, version = repo.requirement.rpartition("@" if repo.source == "npm" else "=")
            assert package and version, repo
            assert repo.name.lower() not in REPOEVAL and package.lower() not in REPOEVAL, repo


def test_each_language_set_has_three_repositories_under_the_ten_sets_protocol():
    ten = shipped("ten")
    for name, languages in (("go", {"go"}), ("rust", {"rust"}), ("typescript", {"typescript", "javascript"}),
                            ("java", {"java"})):
        if shipped_devset(name) is None:
            continue
        devset = shipped(name)
        assert len(devset.repos) >= 3 and {repo.language for repo in devset.repos} <= languages, name
        assert (devset.seed, devset.tasks_per_repo, devset.splits) == (ten.seed, ten.tasks_per_repo, ten.splits)
        assert all(repo.source in ("npm", "deb", "debsrc") for repo in devset.repos), name


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
