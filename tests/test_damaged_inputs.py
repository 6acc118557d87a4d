"""Every CLI command that reads a file, over empty, binary, truncated and damaged copies of real
inputs: a clear error naming the damaged file (exit 2, one ``slurmkit: error:`` line), or a
recovery that says so, never a traceback or an unhandled exception.

Commands (from the click groups in slurmkit/cli/): report jobs / period / day-sums / store /
weekly over a store's files and over sacct captures, --sacct-fields, --spool, --site and the
breakdown captures (--events, --reservations, --nodes, --assoc-tree, --sreport-*); health check
(--from, --kernel-log, --site), snapshot --from, import (and --fabric); topo parse / import
(and --smi-q); site check / gres-conf / slurm-conf / topology-conf (a profile, the profile it
extends, --slurm-conf, --gres-conf); hooks install / uninstall (slurm.conf, --site), gpu-reset
(--config), prolog and healthcheck (a replayed snapshot, gres.conf); submit (--site,
--env-file). Not here: topo discover and live health reads (NVML), logs / status (Slurm).

The inputs are real ones, damaged here; each case's label says which input and how:

- captures and configs from ``../shared/corpus`` (the ``corpus`` fixture: its README names each
  file's origin), the sandbox captures in tests/report/data/sreport (their README), the shipped
  profile site/dgx-a100.toml, the env file tests/submit/envfiles/torchtitan-multinode_trainer.env;
- a Parquet store built by ``slurmkit report store`` from the corpus's
  sacct/habrok_gpu_cluster_parsable2.psv (days 2024-04-15 .. 2024-04-18, with their day sums
  and ``_manifest.json`` / ``_sums.json``) and two weekly aggregates written by ``report weekly
  --store`` from the same capture, and a store of the sandbox hour (sandbox_sacct.psv);
- snapshots written by ``slurmkit health import`` from the corpus's dual_a5000-v13.xml and
  8xH100_hw_slowdown_power_brake.txt, an energy spool record as the epilog writes it
  (slurmkit.hooks.spool's fields) and hooks configs as ``hooks install`` writes them.

Damage (:data:`DAMAGE`): ``missing`` (the file removed: an OS error), ``empty`` (0 bytes),
``truncated`` (the first half of the bytes: cut mid-line, a Parquet file without its footer),
``binary`` (a PNG signature and the 256 byte values in place of the text), ``footer`` (a
Parquet file's footer bytes overwritten, size and modification time kept, as bit rot leaves
them: a stamp check cannot see it), ``other`` (another real Parquet file of the store in its
place: a weekly aggregate for a day's file, a day's allocation rows for a weekly aggregate),
``shape`` (valid JSON of the wrong shape: a list where an object is expected), ``fields`` (the
store manifest's entry of a day with its ``dq`` and ``pulled_at`` of the wrong types).

The CLI runs in-process (click's CliRunner): no Slurm, no GPU.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli

REPO = Path(__file__).resolve().parent.parent
SREPORT = REPO / "tests" / "report" / "data" / "sreport"
PROFILE = REPO / "site" / "dgx-a100.toml"
ENVFILE = REPO / "tests" / "submit" / "envfiles" / "torchtitan-multinode_trainer.env"
DAY = "2024-04-16"
WINDOW = ["--start", "2024-04-15", "--end", "2024-04-19"]
HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"


def _empty(data: bytes) -> bytes:
    return b""


def _truncated(data: bytes) -> bytes:
    return data[:len(data) // 2]


def _binary(data: bytes) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def _footer(data: bytes) -> bytes:
    # a Parquet file ends <thrift footer><4-byte footer length>PAR1: overwrite the footer's
    # first 64 bytes (its version and schema), keeping the length and the magic
    assert data[-4:] == b"PAR1", "not a Parquet file"
    at = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    return data[:at] + b"\xff" * 64 + data[at + 64:]


def _shape(data: bytes) -> bytes:
    return b'["' + DAY.encode() + b'"]\n'


def _fields(data: bytes) -> bytes:
    # the store manifest's entry of DAY with its data quality and pull time of the wrong types
    man = json.loads(data)
    man[DAY].update(dq=[man[DAY]["dq"]], pulled_at=str(man[DAY]["pulled_at"]))
    return json.dumps(man).encode()


DAMAGE = {"missing": None, "other": None, "empty": _empty, "truncated": _truncated, "binary": _binary, "footer": _footer, "shape": _shape, "fields": _fields}
TEXT = ("empty", "truncated", "binary", "missing")
PARQUET = ("empty", "truncated", "binary", "footer", "other", "missing")
JSONS = ("empty", "truncated", "binary", "shape", "missing")


@dataclass(frozen=True)
class Case:
    """One command over one damaged input: ``argv`` (``{store}``, ``{damaged}``, ``{out}``,
    ``{corpus}``, ``{snapshot}``, ``{sandbox_store}`` filled in), ``target``: the input damaged
    (a path under the store copy, or ``corpus:``/``repo:``/``sreport:`` and a path, or
    ``snapshot``/``spool``/``hooks-config``), ``damages``: the kinds applied. ``recovers``:
    damage -> ``(exit status, why)`` for what the command gets over; a ``why`` starting
    "warns" means its output names the damaged file. ``gaps``: damage -> what is not caught
    yet (an expected failure, strict: a fix shows up as a test to update)."""

    id: str
    argv: tuple
    target: str
    damages: tuple = TEXT
    recovers: dict = field(default_factory=dict)
    gaps: dict = field(default_factory=dict)
    wrapper: str = ""   # the text of ``{wrapper}``, a file naming the damaged one (``{damaged}``)


S = "{store}/cluster=_default"
STALE = (0, "a sums file or sums manifest that changed (or is gone) is stale: summed again (day-sums), every row "
            "read (period)")
UNREAD = (0, "its stamp (size, modification time) is as summed: day-sums has nothing to do and reads nothing")
NO_STEPS = (0, "the day sums read no step rows")
STORE_CASES = [
    ("jobs", ("report", "jobs", "--store", "{store}", *WINDOW), ("allocs", "steps", "manifest")),
    ("period", ("report", "period", "--store", "{store}", *WINDOW, "-o", "{out}", "--format", "json"),
     ("allocs", "steps", "manifest", "sums", "sums-manifest")),
    ("day-sums", ("report", "day-sums", "--store", "{store}"), ("allocs", "steps", "manifest", "sums", "sums-manifest")),
]
LOST = {"jobs": (0, "warns: a day the manifest lists without its file: its jobs are not listed, said so"),
        "period": (0, "warns: a day the manifest lists without its file: counted as missing, said so"),
        "day-sums": (0, "a day without its files is not stored: nothing to sum (the reports say it is missing)")}
STORE_FILES = {   # name -> (path under the cluster folder, damages, recovers per command)
    "allocs": (f"day={DAY}/allocs.parquet", PARQUET,
               {"day-sums": {"footer": UNREAD, "missing": LOST["day-sums"]},
                **{c: {"missing": LOST[c]} for c in ("jobs", "period")}}),
    "steps": (f"day={DAY}/steps.parquet", PARQUET,
              {"day-sums": {**dict.fromkeys(PARQUET, NO_STEPS), "missing": LOST["day-sums"]},
               # (the period report reads the steps' energy and efficiency: a damaged step file is
               # the clear error a damaged day file is)
               "period": {"missing": LOST["period"]},
               "jobs": {"missing": LOST["jobs"]}}),
    "manifest": ("_manifest.json", JSONS + ("fields",), {}),
    "sums": (f"day={DAY}/_sums.parquet", PARQUET,
             {"period": dict.fromkeys(TEXT + ("other",), STALE),
              "day-sums": {**dict.fromkeys(TEXT + ("other",), STALE), "footer": UNREAD}}),
    "sums-manifest": ("_sums.json", JSONS, {c: dict.fromkeys(JSONS, STALE) for c in ("period", "day-sums")}),
}
WEEKLY_SANDBOX = ("report", "weekly", "--from-sacct", str(SREPORT / "sandbox_sacct.psv"), "--start", "2026-12-02",
                  "--end", "2026-12-03", "--tz", "UTC", "--as-of", "2026-12-02T14:05:00", "--no-store", "--no-sreport",
                  "--format", "json", "-o", "{out}")
PERIOD_SANDBOX = ("report", "period", "--store", "{sandbox_store}", "--start", "2026-12-02", "--end", "2026-12-03",
                  "-o", "{out}", "--format", "json", "--tz", "UTC", "--now", "2026-12-02T14:05:00")
CASES = [
    # -- the store: day files, day sums, manifests, weekly aggregates
    *[Case(f"report-{cmd}-{name}", argv, f"{S}/{STORE_FILES[name][0]}", STORE_FILES[name][1],
           STORE_FILES[name][2].get(cmd, {}))
      for cmd, argv, names in STORE_CASES for name in names],
    # the account tree's breakdown reads the day files' Cluster column first
    Case("report-period-tree-allocs", ("report", "period", "--store", "{store}", *WINDOW, "-o", "{out}", "--format",
                                       "json", "--tz", "UTC", "--assoc-tree", str(SREPORT / "sandbox_assoc_tree.psv")),
         f"{S}/day={DAY}/allocs.parquet", PARQUET, {"missing": LOST["period"]}),
    # report store over a damaged store: its manifest (never overwritten: the days it lists
    # would be lost); a day file not final is pulled again from the capture
    Case("report-store-manifest", ("report", "store", "--from-sacct", "{corpus}/" + HABROK, "--store", "{store}",
                                   *WINDOW), f"{S}/_manifest.json", JSONS + ("fields",)),
    Case("report-store-allocs", ("report", "store", "--from-sacct", "{corpus}/" + HABROK, "--store", "{store}",
                                 *WINDOW), f"{S}/day={DAY}/allocs.parquet", PARQUET,
         # (a day file the merge cannot read is refused, naming it and --replace: what it held is not
         # dropped unasked; a day whose file is missing is stored again from the capture)
         {"missing": (0, "a day without its file is stored again from the capture")}),
    Case("report-weekly-weeks", ("report", "weekly", "--from-sacct", "{corpus}/" + HABROK, "--store", "{store}",
                                 "--week", "2024-W16", "--format", "json", "-o", "{out}", "--no-sreport",
                                 "--allow-skipped"), f"{S}/_weeks/2024-W15.parquet", PARQUET,
         {"missing": (0, "a week never built is not in the trends")}),
    # -- sacct captures and what is read with them
    Case("report-weekly-capture", ("report", "weekly", "--from-sacct", "{damaged}", "--week", "2024-W16", "--no-store",
                                   "--format", "json", "-o", "{out}", "--no-sreport"), "corpus:" + HABROK),
    # a capture cut inside a row (no line end after its last, short line) is refused whole: stored,
    # its days would be final without the rows after the cut
    Case("report-jobs-capture", ("report", "jobs", "--from-sacct", "{damaged}", *WINDOW), "corpus:" + HABROK),
    Case("report-store-capture", ("report", "store", "--from-sacct", "{damaged}", "--store", "{out}/s", *WINDOW),
         "corpus:" + HABROK),
    Case("report-weekly-fields", ("report", "weekly", "--from-sacct", "{corpus}/sacct/habrok_gpu_cluster_snowman_delim.txt",
                                  "--sacct-fields", "{damaged}", "--week", "2024-W16", "--no-store", "--format", "json",
                                  "-o", "{out}", "--no-sreport"), "corpus:sacct/habrok_format_fields.txt"),
    Case("report-weekly-spool", ("report", "weekly", "--from-sacct", "{corpus}/" + HABROK, "--week", "2024-W16",
                                 "--no-store", "--format", "json", "-o", "{out}", "--no-sreport", "--allow-skipped",
                                 "--spool", "{damaged}"), "spool",
         recovers={"empty": (0, "an empty spool holds no record"),
                   "missing": (0, "warns: a spool that cannot be opened is said, the report made without it"),
                   "truncated": (0, "warns: a line that does not parse is named (file:line) and skipped"),
                   "binary": (0, "warns: a line that does not parse is named (file:line) and skipped")}),
    Case("report-weekly-site", ("report", "weekly", "--from-sacct", "{corpus}/" + HABROK, "--week", "2024-W16",
                                "--no-store", "--format", "json", "-o", "{out}", "--no-sreport", "--site", "{damaged}"),
         "repo:site/dgx-a100.toml"),
    # -- sreport's breakdown and the account tree: captures of the sandbox hour
    *[Case(f"report-{cmd}-{opt[2:]}", argv + (opt, "{damaged}") + extra, "sreport:" + name,
           gaps=gaps.get(cmd, {}))
      for cmd, argv in (("weekly", WEEKLY_SANDBOX), ("period", PERIOD_SANDBOX))
      for opt, name, extra, gaps in (
          ("--events", "sandbox_events.psv", (), {}),
          ("--reservations", "sandbox_reservations.psv", (), {}),
          ("--nodes", "sandbox_scontrol_nodes.txt", (), dict.fromkeys(("weekly", "period"), {
              "truncated": "scontrol show -o nodes cut inside a line: the fragment (NodeNa) is passed over, and "
                           "the nodes after it are missing unsaid"})),
          ("--assoc-tree", "sandbox_assoc_tree.psv", (), {}),
          ("--sreport-utilization", "sandbox_utilization_seconds.txt",
           ("--nodes", str(SREPORT / "sandbox_scontrol_nodes.txt")), {"weekly": {
               "truncated": "an sreport capture cut after its banner (no header, no row): nothing to compare, unsaid"}}),
          ("--sreport-accounts", "sandbox_account_users_seconds.txt",
           ("--assoc-tree", str(SREPORT / "sandbox_assoc_tree.psv")), {}))],
    # -- health: captures, snapshots, fabric captures, kernel logs, profiles
    Case("health-check-xml", ("health", "check", "--from", "{damaged}"), "corpus:nvidia-smi-q/dual_a5000-v13.xml"),
    Case("health-check-text", ("health", "check", "--from", "{damaged}"), "corpus:nvidia-smi-q/a10_row_remap_pending.txt"),
    Case("health-check-snapshot", ("health", "check", "--from", "{damaged}"), "snapshot", TEXT + ("shape",)),
    Case("health-check-kernel-log", ("health", "check", "--from", "{snapshot}", "--kernel-log", "{damaged}"),
         "corpus:logs/dmesg_xid119.log",
         recovers={"empty": (0, "a kernel log with no Xid line: no Xid"),
                   "binary": (0, "a kernel log holds any driver's bytes: read with them replaced, no Xid line"),
                   "truncated": (1, "the Xid 119 line is in the first half: the check fails on it (exit 1)"),
                   "missing": (2, "warns: click refuses a --kernel-log that does not exist (a usage error)")}),
    Case("health-check-site", ("health", "check", "--from", "{snapshot}", "--site", "{damaged}"),
         "repo:site/dgx-a100.toml"),
    Case("health-snapshot-from", ("health", "snapshot", "--from", "{damaged}", "-o", "{out}/snap.json"),
         "corpus:nvidia-smi-q/dual_a5000-v13.xml"),
    Case("health-import", ("health", "import", "{damaged}", "-o", "{out}/snap.json"),
         "corpus:nvidia-smi-q/tesla-t4.xml"),
    Case("health-diag-table", ("health", "diag", "--from", "{damaged}"),
         "corpus:fabric/DCGM-253_diag_v4.2.3-format_software-per-GPU-Pass.TRUNCATED.txt"),
    Case("health-diag-json", ("health", "diag", "--from", "{damaged}"), "repo:tests/health/dcgmi/dcgm4-h100x8-r3-pass.json",
         damages=JSONS),
    Case("health-diag-health", ("health", "diag", "--from", "{damaged}"),
         "corpus:fabric/dcgmi/DCGM-263_health-c-j_output_Overall-Healthy.json.txt"),
    Case("health-import-fabric", ("health", "import", "{corpus}/nvidia-smi-q/dual_a5000-v13.xml", "-o",
                                  "{out}/snap.json", "--fabric", "{damaged}"), "corpus:fabric/ibstat.47.0.a100.all.active.0"),
    # -- topology
    Case("topo-parse", ("topo", "parse", "{damaged}"), "corpus:topo/dgx_a100_12nic.txt"),
    Case("topo-import", ("topo", "import", "{damaged}", "--name", "dgx"), "corpus:topo/dgx_a100_12nic.txt"),
    Case("topo-import-smi-q", ("topo", "import", "{corpus}/topo/dgx_a100_12nic.txt", "--name", "dgx",
                               "--smi-q", "{damaged}"), "corpus:nvidia-smi-q/8xH100_hw_slowdown_power_brake.txt"),
    # -- site profiles and a cluster's slurm.conf / gres.conf
    *[Case(f"site-{cmd}", ("site", cmd, "{damaged}"), "repo:site/dgx-a100.toml")
      for cmd in ("check", "gres-conf", "slurm-conf", "topology-conf")],
    Case("site-check-extends", ("site", "check", "{wrapper}"), "repo:site/dgx-a100.toml",
         wrapper='extends = "{damaged}"\n[cluster]\nname = "child"\n',
         recovers={"empty": (2, "an empty base profile is an empty table: what the child lacks is named")}),
    Case("site-check-slurm-conf", ("site", "check", str(PROFILE), "--slurm-conf", "{damaged}"),
         "corpus:sites/ocotillo_slurm.conf",
         recovers={"empty": (1, "warns: a slurm.conf with no line has none of the profile's nodes: each "
                                "disagreement named (exit 1)")}),
    Case("site-check-gres-conf", ("site", "check", str(PROFILE), "--slurm-conf", "{corpus}/sites/ocotillo_slurm.conf",
                                  "--gres-conf", "{damaged}"), "corpus:sites/ocotillo_gres.conf",
         recovers={"empty": (1, "warns: a gres.conf with no line gives no GPU: each disagreement named (exit 1)"),
                   "truncated": (1, "warns: the cut line and the GPUs missing are disagreements, named (exit 1)")}),
    # -- hooks: install / uninstall read slurm.conf (and the profile); gpu-reset the hooks config
    Case("hooks-install", ("hooks", "install", "--slurm-conf", "{damaged}", "--dry-run"),
         "corpus:sites/genomedk_slurm.conf",
         recovers={"empty": (0, "warns: a dry run over a slurm.conf with no line: the lines install adds"),
                   "truncated": (0, "warns: a dry run: the lines install adds to what is there")}),
    Case("hooks-install-site", ("hooks", "install", "--slurm-conf", "{corpus}/sites/genomedk_slurm.conf", "--dry-run",
                                "--site", "{damaged}"), "repo:site/dgx-a100.toml"),
    Case("hooks-uninstall", ("hooks", "uninstall", "--slurm-conf", "{damaged}", "--dry-run"),
         "corpus:sites/genomedk_slurm.conf",
         recovers={"empty": (0, "nothing installed there: nothing to undo"),
                   "truncated": (0, "nothing installed there: nothing to undo")}),
    Case("hooks-gpu-reset-config", ("hooks", "gpu-reset", "0000:07:00.0", "--done", "--node", "n1",
                                    "--config", "{damaged}"), "hooks-config"),
    # a hook run (node dgx1 of the corpus's 4x DGX-1 slurm.conf / gres.conf, replaying a snapshot
    # of the 8xH100 capture): what it cannot read is its own trouble, logged naming the file,
    # never a blocked job (exit 0)
    *[Case(f"hooks-{hook}-{name}", ("hooks", hook, "--config", "{hookcfg}"), f"hook:{name}", kinds,
           recovers=dict.fromkeys(kinds, (0, f"warns: {why}")), gaps=gaps)
      for hook in ("prolog", "healthcheck")
      for name, kinds, why, gaps in (
          ("snapshot.json", TEXT + ("shape",), "the snapshot that cannot be read is the hook's own trouble, named", {}),
          # (an empty gres.conf is a cluster without GPUs: "no GPUs expected", by design)
          ("gres.conf", tuple(k for k in TEXT if k != "empty"),
           "a gres.conf that cannot be read or is not there is the hook's own trouble, named",
           {"truncated": "a gres.conf cut inside a line (Name=gpu File=/dev/nv) reads as the GPUs before it, "
                         "unsaid"}))],
    # -- submit: the profile and an env file
    Case("submit-site", ("submit", "torchrun", "--site", "{damaged}", "--dry-run", "-N", "1", "--", "python", "t.py"),
         "repo:site/dgx-a100.toml"),
    Case("submit-env-file", ("submit", "torchrun", "--site", str(PROFILE), "--env-file", "{damaged}", "--dry-run",
                             "-N", "1", "--", "python", "t.py"), "repo:tests/submit/envfiles/torchtitan-multinode_trainer.env",
         recovers={"empty": (0, "an env file with no line sets no variable")}),
]


#: A hook's environment as slurmd gives it (the node dgx1 of the hooks config the cases write).
HOOK_ENV = {"SLURMD_NODENAME": "dgx1", "SLURM_JOB_ID": "42", "SLURM_JOB_UID": "0", "SLURM_JOB_USER": "root"}


def _invoke(argv: list[str], env: dict | None = None):
    return CliRunner(env=env).invoke(cli, argv)


def _hook_config(where: Path, corpus: Path) -> Path:
    """``slurmkit-hooks.toml`` as ``hooks install`` writes it (:func:`slurmkit.hooks.config.render`)
    for the corpus's 4x DGX-1 cluster, node dgx1 replaying ``where/snapshot.json``, with
    ``where/gres.conf``; its state, spool and metrics under ``where``; no scontrol (a bin
    folder that does not exist: a drain is the hook's own trouble, never a real node's)."""
    from slurmkit.hooks import config as hook_config

    path = where / "slurmkit-hooks.toml"
    path.write_text(hook_config.render(
        str(corpus / "sites/dgx1x4_slurm.conf"), gres_conf=str(where / "gres.conf"), state_dir=str(where / "state"),
        spool_dir=str(where / "spool"), textfile_dir=str(where / "textfile"), jobs_dir=str(where / "jobs"),
        snapshots={"dgx1": str(where / "snapshot.json")}, slurm_bin_dir=str(where / "no-bin")))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory, corpus):
    """The real inputs the cases damage: a store (``report store`` + ``report weekly --store``
    from the corpus's habrok capture), a store of the sandbox hour (``report store`` from
    tests/report/data/sreport/sandbox_sacct.psv: the breakdown captures' cluster), a snapshot
    (``health import`` of dual_a5000-v13.xml), an energy spool line and a hooks config as
    slurmkit writes them (slurmkit.hooks.spool's record fields, ``hooks.config.render``), and
    a hook's inputs (``hook/``: the snapshot of node dgx1 from the 8xH100 capture and the
    corpus's DGX-1 gres.conf; :func:`_hook_config`)."""
    root = tmp_path_factory.mktemp("real")
    store = root / "store"
    (root / "hook").mkdir()
    for argv in (["report", "store", "--from-sacct", str(corpus / HABROK), "--store", str(store), *WINDOW],
                 *[["report", "weekly", "--from-sacct", str(corpus / HABROK), "--store", str(store), "--week", w,
                    "--format", "json", "-o", str(root / w), "--no-sreport", "--allow-skipped"]
                   for w in ("2024-W15", "2024-W16")],
                 ["report", "store", "--from-sacct", str(SREPORT / "sandbox_sacct.psv"), "--store",
                  str(root / "sandbox_store"), "--tz", "UTC", "--as-of", "2026-12-02T14:05:00"],
                 ["health", "import", str(corpus / "nvidia-smi-q/dual_a5000-v13.xml"), "-o", str(root / "snap.json")],
                 ["health", "import", str(corpus / "nvidia-smi-q/8xH100_hw_slowdown_power_brake.txt"), "--node", "dgx1",
                  "-o", str(root / "hook" / "snapshot.json")]):
        res = _invoke(argv)
        assert res.exit_code == 0, (argv, res.output)
    shutil.copyfile(corpus / "sites/dgx1x4_gres.conf", root / "hook" / "gres.conf")
    assert (store / "cluster=_default" / "_weeks" / "2024-W15.parquet").is_file()
    from slurmkit.hooks import config as hook_config

    (root / "spool.jsonl").write_text(json.dumps(
        {"v": 1, "job_id": "8150389", "node": "a100gpu1", "source": "measured", "energy_mj_total": 1_800_000_000}) + "\n")
    (root / "slurmkit-hooks.toml").write_text(hook_config.render(
        str(corpus / "sites/genomedk_slurm.conf"), profile=str(PROFILE), state_dir=str(root / "state"),
        spool_dir=str(root / "spool"), textfile_dir=str(root / "textfile")))
    return root


def _source(case: Case, built: Path, corpus: Path, work: Path) -> Path:
    """The real file the case damages (copied into ``work`` unless it is in the store copy)."""
    t = case.target
    if t.startswith("{store}"):
        return Path(t.format(store=work / "store"))
    if t.startswith("hook:"):
        shutil.copytree(built / "hook", work / "hook")
        return work / "hook" / t.split(":", 1)[1]
    src = {"snapshot": built / "snap.json", "spool": built / "spool.jsonl",
           "hooks-config": built / "slurmkit-hooks.toml"}.get(t)
    if src is None:
        kind, rel = t.split(":", 1)
        src = {"corpus": corpus, "repo": REPO, "sreport": SREPORT}[kind] / rel
    dest = work / "damaged" / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return dest


PARAMS = [pytest.param(c, d, id=f"{c.id}-{d}",
                       marks=[pytest.mark.xfail(reason=c.gaps[d], strict=True)] if d in c.gaps else [])
          for c in CASES for d in c.damages]


@pytest.mark.parametrize("case,damage", PARAMS)
def test_damaged_input_is_a_clear_error_never_a_traceback(case, damage, built, corpus, tmp_path, monkeypatch):
    if case.target.startswith("{store}") or "{store}" in case.argv:
        shutil.copytree(built / "store", tmp_path / "store")
    path = _source(case, built, corpus, tmp_path)
    st = path.stat()
    if damage == "missing":
        path.unlink()
    elif damage == "other":
        c = built / "store" / "cluster=_default"
        path.write_bytes((c / "_weeks" / "2024-W16.parquet" if path.parent.name.startswith("day=")
                          else c / f"day={DAY}" / "allocs.parquet").read_bytes())
    else:
        path.write_bytes(DAMAGE[damage](path.read_bytes()))
    if damage == "footer":  # bit rot: size and modification time as they were
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    (tmp_path / "out").mkdir()
    wrapper = tmp_path / "wrapper.toml"
    if case.wrapper:
        wrapper.write_text(case.wrapper.format(damaged=path))
    env = None
    if case.target.startswith("hook:"):
        from slurmkit.hooks import config as hook_config

        # (a config that cannot be read: the hook counts its trouble under the defaults' folders)
        monkeypatch.setitem(hook_config.DEFAULTS, "state_dir", str(tmp_path / "default-state"))
        monkeypatch.setitem(hook_config.DEFAULTS, "textfile_dir", str(tmp_path / "default-textfile"))
        env = HOOK_ENV
    hookcfg = _hook_config(tmp_path / "hook", corpus) if case.target.startswith("hook:") else None
    argv = [a.format(store=tmp_path / "store", damaged=path, out=tmp_path / "out", corpus=corpus, wrapper=wrapper,
                     snapshot=built / "snap.json", sandbox_store=built / "sandbox_store", hookcfg=hookcfg)
            for a in case.argv]
    res = _invoke(argv, env)
    said = res.output
    assert "Traceback" not in said and "internal error" not in said, said
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        pytest.fail(f"unhandled {type(res.exception).__name__}: {res.exception}\n"
                    + "".join(traceback.format_exception(res.exception)))
    if damage in case.recovers:
        code, why = case.recovers[damage]
        assert res.exit_code == code, f"expected exit {code} ({why}): {said}"
        if why.startswith("warns"):
            assert str(path) in said, f"expected the output to name {path} ({why}): {said}"
        return
    assert res.exit_code == 2, said
    errors = [line for line in res.stderr.splitlines() if line.startswith("slurmkit: error: ")]
    assert errors and str(path) in errors[-1], said
