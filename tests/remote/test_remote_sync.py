"""What a remote submit sends and where its job runs, against the real sshd pair
(``sshpair.py``): git's own idea of ignored files, the project root from a subfolder, one
project per remote directory, and a run folder per submit that later syncs do not change.
No Slurm needed here (the queued-job case is in ``test_remote_sandbox.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import sshpair
from slurmkit.remote import Remote, RemoteError
from slurmkit.remote import sync as rsync_


@pytest.fixture(scope="module")
def pair():
    with sshpair.running() as p:
        yield p


@pytest.fixture
def git_env(tmp_path, monkeypatch):
    """git with its own global config (never the machine's): core.excludesFile = a file here."""
    glob = tmp_path / "gitconfig"
    excludes = tmp_path / "global-excludes"
    excludes.write_text("*.swp\n")
    glob.write_text(f"[core]\n\texcludesFile = {excludes}\n[user]\n\tname = t\n\temail = t@example.org\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(glob))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return glob


def git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, timeout=30)


def make_repo(root: Path, files: dict) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def sent(dest: Path) -> list[str]:
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*")
                  if p.is_file() and p.relative_to(dest).parts[0] not in (".slurmkit", "slurmkit-runs"))


def test_gitignore_negation_is_synced(pair, tmp_path, git_env):
    proj = make_repo(tmp_path / "proj", {".gitignore": "*.pt\n!small.pt\n", "big.pt": "b", "small.pt": "s",
                                        "train.py": "t"})
    dest = tmp_path / "r"
    rsync_.sync(Remote("login", str(pair.config)), rsync_.find_source(str(proj)), str(dest))
    assert sent(dest) == [".gitignore", "small.pt", "train.py"]


def test_anchored_gitignore_pattern_only_excludes_its_own_path(pair, tmp_path, git_env):
    proj = make_repo(tmp_path / "proj", {".gitignore": "sub/secret.txt\n", "sub/secret.txt": "x",
                                        "other/sub/secret.txt": "kept"})
    dest = tmp_path / "r"
    rsync_.sync(Remote("login", str(pair.config)), rsync_.find_source(str(proj)), str(dest))
    assert sent(dest) == [".gitignore", "other/sub/secret.txt"]


def test_info_exclude_global_excludes_and_tracked_files_follow_git(pair, tmp_path, git_env):
    proj = make_repo(tmp_path / "proj", {".gitignore": "*.log\n", "a.py": "a", "notes.swp": "vim", "mine.tmp": "m",
                                        "keep.log": "tracked", "run.log": "untracked", "key.secret": "k"})
    (proj / ".git" / "info").mkdir(exist_ok=True)
    (proj / ".git" / "info" / "exclude").write_text("*.tmp\n")
    git(proj, "add", "-f", "keep.log", "a.py")       # tracked although ignored: git sends it
    git(proj, "commit", "-q", "-m", "x")
    (proj / "a.py").unlink()                          # deleted, not staged: nothing to send, no error
    dest = tmp_path / "r"
    rsync_.sync(Remote("login", str(pair.config)), rsync_.find_source(str(proj)), str(dest), excludes=["*.secret"])
    assert sent(dest) == [".gitignore", "keep.log"]


def test_outside_git_the_gitignore_filter_still_applies(pair, tmp_path):
    proj = tmp_path / "plain"
    proj.mkdir()
    (proj / ".gitignore").write_text("*.ckpt\n")
    (proj / "m.ckpt").write_text("w")
    (proj / "t.py").write_text("t")
    src = rsync_.find_source(str(proj))
    assert not src.git
    dest = tmp_path / "r"
    rsync_.sync(Remote("login", str(pair.config)), src, str(dest))
    assert sent(dest) == [".gitignore", "t.py"]


def test_a_submit_from_a_subfolder_syncs_the_project_root_and_runs_in_the_subfolder(pair, tmp_path, git_env):
    proj = make_repo(tmp_path / "myproj", {".gitignore": "data/\n", "config.yaml": "lr: 1\n",
                                          "scripts/train.py": "t", "data/shard": "big"})
    src = rsync_.find_source(None, str(proj / "scripts"))
    assert (src.root, src.subdir, src.name) == (str(proj), "scripts", "myproj")
    cli = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "--remote", "login",
                          "--ssh-config", str(pair.config), "--site", "sandbox", "--remote-dir", str(tmp_path / "r"),
                          "--explain", "--", "python", "train.py"], capture_output=True, text=True,
                         cwd=proj / "scripts", timeout=120)
    assert cli.returncode == 0, cli.stderr
    chdir = [ln for ln in cli.stdout.splitlines() if ln.startswith("#SBATCH --chdir=")]
    assert len(chdir) == 1 and f"--chdir={tmp_path}/r/slurmkit-runs/" in chdir[0]
    assert chdir[0].split()[1].endswith("/scripts") and "subfolder scripts" in chdir[0]
    dest = tmp_path / "r"
    rsync_.sync(Remote("login", str(pair.config)), src, str(dest), run_id="RUN1")
    assert sent(dest) == [".gitignore", "config.yaml", "scripts/train.py"]
    assert (dest / "slurmkit-runs" / "RUN1" / "scripts" / "train.py").read_text() == "t"


def test_two_projects_with_one_name_do_not_share_a_remote_dir(pair, tmp_path):
    a, b = tmp_path / "a" / "exp", tmp_path / "b" / "exp"
    for d in (a, b):
        d.mkdir(parents=True)
        (d / "train.py").write_text(str(d))
    # both would default to ~/slurmkit-remote/exp
    name_a, name_b = rsync_.find_source(str(a)).name, rsync_.find_source(str(b)).name
    assert rsync_.resolve_remote_dir(None, name_a, "/home/u") == rsync_.resolve_remote_dir(None, name_b, "/home/u")
    dest = tmp_path / "r" / "exp"
    remote = Remote("login", str(pair.config))
    rsync_.sync(remote, rsync_.find_source(str(a)), str(dest))
    rsync_.sync(remote, rsync_.find_source(str(a)), str(dest))        # the same project again: fine
    with pytest.raises(RemoteError) as err:
        rsync_.sync(remote, rsync_.find_source(str(b)), str(dest))
    msg = str(err.value)
    assert msg.startswith(f"login: sync: {dest} holds another project (synced from ")
    assert f":{a};" in msg and f":{b})" in msg and "--remote-dir" in msg and "\n" not in msg
    assert (dest / "train.py").read_text() == str(a)                  # nothing of b was sent
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "--remote", "login",
                           "--ssh-config", str(pair.config), "--site", "sandbox", "--remote-dir", str(dest),
                           "--", "true"], capture_output=True, text=True, cwd=b, timeout=120)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "holds another project" in proc.stderr


def test_each_run_folder_keeps_what_was_synced_for_it(pair, tmp_path, git_env):
    proj = make_repo(tmp_path / "proj", {"config.yaml": "lr: 1\n", "train.py": "same"})
    remote = Remote("login", str(pair.config))
    dest = tmp_path / "r"
    src = rsync_.find_source(str(proj))
    t = 1_700_000_000_500_000_000           # both versions in the same second, the same size
    os.utime(proj / "config.yaml", ns=(t, t))
    rsync_.sync(remote, src, str(dest), run_id="A")
    run_a = Path(rsync_.finish_run(remote, str(dest), "A"))
    (proj / "config.yaml").write_text("lr: 2\n")
    os.utime(proj / "config.yaml", ns=(t, t + 1000))
    (proj / "new.py").write_text("n")
    rsync_.sync(remote, src, str(dest), run_id="B")
    run_b = Path(rsync_.finish_run(remote, str(dest), "B"))
    assert (run_a / "config.yaml").read_text() == "lr: 1\n" and not (run_a / "new.py").exists()
    assert (run_b / "config.yaml").read_text() == "lr: 2\n" and (run_b / "new.py").exists()
    # unchanged files cost nothing: one inode for the synced tree and both runs
    assert os.stat(run_a / "train.py").st_ino == os.stat(run_b / "train.py").st_ino == os.stat(dest / "train.py").st_ino
    # --no-sync: the run folder is copied from the tree already there
    run_c = Path(rsync_.finish_run(remote, str(dest), "C", copy_tree=True))
    assert sorted(p.name for p in run_c.iterdir()) == ["config.yaml", "new.py", "train.py"]
    assert os.stat(run_c / "train.py").st_ino == os.stat(dest / "train.py").st_ino
