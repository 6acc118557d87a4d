"""Submit on shared GPUs (no Slurm needed): a MIG partition gets one instance per process and
refuses the NCCL launchers with the reason; ``--gres shard:N`` / ``mps:N`` checked against the
partition's node type; CPUs and memory per GPU set per node type.

The profile is tests/topology/kinds/kinds.toml (its README names the real site each node type
is edited from): partition ``mig`` (2 x ``3g.20gb`` on an A100-SXM4-40GB, Slurm type
``nvidia_a100_3g.20gb``), ``shard`` (2 RTX 3090, 4 shards each, ``Flags=one_sharing``),
``mps`` (2 RTX 3090, MPS 100 each), ``gpus`` (8 untyped GPUs, no sharing).
"""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.errors import UsageError
from slurmkit.profile import ProfileError, load_profile
from slurmkit.submit import render, site, templates
from slurmkit.submit.templates import TemplateError

KINDS = Path(__file__).resolve().parents[1] / "topology" / "kinds" / "kinds.toml"

MIG_WHY = ("partition mig's GPUs are MIG instances (nvidia_a100_3g.20gb: 3g.20gb on NVIDIA A100-SXM4-40GB; "
           "profile node_types.a100-mig.gpu_groups mig)")


def plan_for(name, partition, profile=None, command=("python3", "job.py"), **kw):
    facts = site.site_facts(profile or load_profile(KINDS), partition)
    return render.plan(render.SubmitRequest(template=name, command=command, partition=partition, **kw), facts,
                       templates.get(name))


def sbatch_lines(p):
    return [line for line in render.render(p).splitlines() if line.startswith("#SBATCH")]


def run_cli(*args):
    return CliRunner().invoke(cli, ["submit", *args], catch_exceptions=False)


# -- MIG: one instance per process -----------------------------------------------------------

def test_single_gpu_on_mig_asks_for_one_instance():
    p = plan_for("single-gpu", "mig")
    assert sbatch_lines(p) == ["#SBATCH --job-name=single-gpu", "#SBATCH --partition=mig", "#SBATCH --nodes=1",
                               "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=nvidia_a100_3g.20gb:1",
                               "#SBATCH --cpus-per-gpu=1"]
    # the bind wrapper indexes this by Slurm's GPU index (SLURM_STEP_GPUS): one entry per
    # instance, each its parent GPU's CPUs (gpus[0].cpus = [0, 1]); CUDA_VISIBLE_DEVICES is
    # left as Slurm sets it, so an instance's MIG- UUID reaches the program
    assert "export SLURMKIT_GPU_CPUS='0-1 0-1'" in render.render(p)
    assert "CUDA_VISIBLE_DEVICES=" not in render.render(p)
    assert ("one instance per process: Slurm sets the task's CUDA_VISIBLE_DEVICES to it (its MIG- UUID under "
            "gres.conf AutoDetect=nvml, else its index)") in render.explain(p)


def test_array_on_mig_gives_each_task_one_instance():
    p = plan_for("array", "mig", command=("python3", "job.py", "--lr", "{lr}"),
                 sets={"sets": '[{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001}]', "throttle": "2"})
    assert sbatch_lines(p) == ["#SBATCH --job-name=array", "#SBATCH --partition=mig", "#SBATCH --nodes=1",
                               "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=nvidia_a100_3g.20gb:1",
                               "#SBATCH --cpus-per-gpu=1", "#SBATCH --array=0-2%2"]


@pytest.mark.parametrize("name, tasks", [("torchrun", "per-node"), ("deepspeed", "per-node"), ("srun", "per-gpu"),
                                         ("nccl-tests", "per-gpu")])
def test_nccl_templates_are_refused_on_mig(name, tasks):
    assert templates.get(name).tasks == tasks
    with pytest.raises(TemplateError) as exc:
        plan_for(name, "mig")
    assert str(exc.value) == (
        f"{name}: {MIG_WHY}: template {name} starts ranks that talk over NCCL, which does not run between MIG "
        "instances (no GPU-to-GPU P2P over PCIe or NVLink), and one CUDA process sees only one MIG instance; run "
        "one process per instance with single-gpu or array, or use a partition of whole GPUs")


@pytest.mark.parametrize("mode", ["--dry-run", "--explain"])
def test_torchrun_on_mig_is_refused_by_the_cli_with_exit_2(mode):
    res = run_cli("torchrun", "--site", str(KINDS), "-p", "mig", "-N", "1", mode, "--", "python3", "train.py")
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        f"slurmkit: error: torchrun: {MIG_WHY}: template torchrun starts ranks that talk over NCCL, which does not "
        "run between MIG instances (no GPU-to-GPU P2P over PCIe or NVLink), and one CUDA process sees only one MIG "
        "instance; run one process per instance with single-gpu or array, or use a partition of whole GPUs"]
    assert res.stdout == ""


def test_more_than_one_instance_per_process_is_refused():
    with pytest.raises(TemplateError) as exc:
        plan_for("single-gpu", "mig", gpus_per_node=2)
    assert str(exc.value) == (
        f"--gpus-per-node 2: {MIG_WHY}: one CUDA process sees only one MIG instance, so template single-gpu runs "
        "on one; give --gpus-per-node 1 (or leave it out), an array for several processes, or a partition of whole "
        "GPUs")


def test_whole_gpu_partitions_keep_their_launchers():
    # the same profile's untyped 8-GPU partition: torchrun asks for every GPU, as before
    assert "#SBATCH --gpus-per-node=8" in sbatch_lines(plan_for("torchrun", "gpus"))


# -- shards and MPS: --gres ------------------------------------------------------------------

@pytest.mark.parametrize("partition, gres", [("shard", "shard:2"), ("mps", "mps:50"), ("shard", "shard:4")])
def test_gres_share_is_rendered_without_whole_gpus(partition, gres):
    p = plan_for("single-gpu", partition, gres=gres)
    assert sbatch_lines(p) == ["#SBATCH --job-name=single-gpu", f"#SBATCH --partition={partition}",
                               "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", f"#SBATCH --gres={gres}"]


def test_bare_shard_is_one():
    assert "#SBATCH --gres=shard:1" in sbatch_lines(plan_for("array", "shard", gres="shard", sets={"sets": '[{}]'}))


@pytest.mark.parametrize("partition, gres, message", [
    ("mps", "shard:2", "--gres shard:2: partition mps offers no shard (profile "
     "node_types.rtx3090-mps.gpu_groups[].shards); it offers mps:N (N up to 100); partitions offering shard: shard"),
    ("gpus", "mps:10", "--gres mps:10: partition gpus offers no mps (profile node_types.dgx1-untyped.gpu_groups[].mps); "
     "partitions offering mps: mps"),
    ("mig", "shard:1", "--gres shard:1: partition mig offers no shard (profile "
     "node_types.a100-mig.gpu_groups[].shards); partitions offering shard: shard"),
    ("shard", "shard:5", "--gres shard:5: partition shard gives one job at most 4 shard per node (4 per GPU, all "
     "from one GPU (gres.conf Flags=one_sharing); profile node_types.rtx3090-shard.gpu_groups[].shards)"),
    ("mps", "mps:101", "--gres mps:101: partition mps gives one job at most 100 mps per node (100 per GPU, all from "
     "one GPU (gres.conf Flags=one_sharing, MPS's default); profile node_types.rtx3090-mps.gpu_groups[].mps)"),
    ("shard", "shard:0", "--gres shard:0: must ask for at least 1 shard (got 0)"),
    ("shard", "gpu:1", "--gres gpu:1: whole GPUs are --gpus-per-node (and --gpu-type on a mixed node); --gres takes "
     "shard:N or mps:N"),
    ("shard", "bandwidth:4G", "--gres bandwidth:4G: expected shard:N or mps:N (Slurm's shared GPU gres)"),
])
def test_gres_refusals_name_what_is_offered(partition, gres, message):
    with pytest.raises(UsageError) as exc:
        plan_for("single-gpu", partition, gres=gres)
    assert str(exc.value) == message


def test_gres_with_whole_gpus_or_memory_per_gpu_is_refused():
    with pytest.raises(UsageError) as exc:
        plan_for("single-gpu", "shard", gres="shard:1", gpus_per_node=1)
    assert str(exc.value) == ("--gres shard:1: give --gres shard:N or --gpus-per-node, not both: Slurm does not "
                              "allocate a GPU and its shard gres to one job")
    with pytest.raises(UsageError) as exc:
        plan_for("single-gpu", "mps", gres="mps:20", mem_per_gpu="8G")
    assert str(exc.value) == "--mem-per-gpu: is per allocated GPU and a --gres mps job is allocated none: give --mem (per node)"
    assert "#SBATCH --mem=8G" in sbatch_lines(plan_for("single-gpu", "mps", gres="mps:20", mem="8G"))


def test_gres_on_a_multi_rank_template_is_refused():
    with pytest.raises(TemplateError) as exc:
        plan_for("torchrun", "shard", gres="shard:2")
    assert str(exc.value) == ("torchrun: --gres shard:2 is part of one GPU for one process, and template torchrun "
                              "starts several ranks (NCCL refuses two ranks on one GPU); use single-gpu or array")


def test_gres_through_the_cli():
    res = run_cli("single-gpu", "--site", str(KINDS), "-p", "shard", "--gres", "shard:3", "--dry-run", "--", "nvidia-smi")
    assert res.exit_code == 0 and "#SBATCH --gres=shard:3\n" in res.stdout and "--gpus-per-node" not in res.stdout
    res = run_cli("single-gpu", "--site", str(KINDS), "-p", "mps", "--gres", "shard:3", "--explain", "--", "nvidia-smi")
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        "slurmkit: error: --gres shard:3: partition mps offers no shard (profile "
        "node_types.rtx3090-mps.gpu_groups[].shards); it offers mps:N (N up to 100); partitions offering shard: shard"]


# -- CPUs and memory per GPU per node type -----------------------------------------------------

def test_cpus_and_memory_per_gpu_per_node_type():
    prof = load_profile(KINDS, overrides=({"node_types": {"a100-mig": {"cpus_per_gpu": 2, "mem_per_gpu": "20G"}},
                                           "submit": {"cpus_per_gpu": 4}},))
    p = plan_for("single-gpu", "mig", profile=prof)
    assert sbatch_lines(p)[-2:] == ["#SBATCH --cpus-per-gpu=2", "#SBATCH --mem-per-gpu=20G"]
    text = render.explain(p)
    assert re.search(r"^#SBATCH --cpus-per-gpu=2 +<- profile node_types\.a100-mig\.cpus_per_gpu$", text, re.M)
    assert "<- profile node_types.a100-mig.mem_per_gpu (no --mem / --mem-per-gpu given)" in text
    # the job's own memory wins; another node type keeps [submit].cpus_per_gpu
    assert "#SBATCH --mem-per-gpu" not in "\n".join(sbatch_lines(plan_for("single-gpu", "mig", profile=prof, mem="30G")))
    assert sbatch_lines(plan_for("single-gpu", "mig", profile=prof, mem_per_gpu="10G"))[-1] == "#SBATCH --mem-per-gpu=10G"
    other = sbatch_lines(plan_for("torchrun", "gpus", profile=prof))
    assert "#SBATCH --cpus-per-gpu=4" in other and not any("mem-per-gpu" in line for line in other)


@pytest.mark.parametrize("key, value, message", [
    ("mem_per_gpu", "20 GB", "node_types.a100-mig.mem_per_gpu: expected a Slurm memory size such as \"64G\" (a whole "
     "number > 0 with an optional unit K, M, G or T), got '20 GB'"),
    ("mem_per_gpu", 20, "node_types.a100-mig.mem_per_gpu: expected"),
    ("cpus_per_gpu", 0, "node_types.a100-mig.cpus_per_gpu: must be >= 1, got 0"),
])
def test_per_node_type_settings_are_validated(key, value, message):
    with pytest.raises(ProfileError) as exc:
        load_profile(KINDS, overrides=({"node_types": {"a100-mig": {key: value}}},))
    assert message in str(exc.value)


def test_a_sites_own_mig_names_are_mig_too(tmp_path):
    """docs/gpu-sharing.md's profile with Magic Castle's naming (mig_type = "{profile}",
    mig_files = "/dev/nvidia-mig-{profile}-{i}"): the partition is still MIG (NCCL templates
    refused, one instance per process), and --gpu-type takes the MIG profile's name."""
    import re as _re
    from pathlib import Path

    from click.testing import CliRunner

    from slurmkit.cli import cli

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu-sharing.md").read_text()
    prof = _re.search(r"<!-- example: profile -->\n```toml\n(.*?)```", doc, flags=_re.S).group(1)
    prof = prof.replace('  mig = { "1g.20gb" = 4 }', '  mig = { "3g.40gb" = 1, "2g.20gb" = 1, "1g.10gb" = 2 }\n'
                        '  mig_type = "{profile}"\n  mig_files = "/dev/nvidia-mig-{profile}-{i}"')
    prof = prof.replace('autodetect = "nvml"\n', "")
    (tmp_path / "mc.toml").write_text(prof)
    run = CliRunner().invoke
    res = run(cli, ["submit", "torchrun", "-p", "mig", "--site", str(tmp_path / "mc.toml"), "--dry-run", "--", "x"])
    assert res.exit_code == 2 and "partition mig's GPUs are MIG instances (3g.40gb: 3g.40gb on NVIDIA A100-SXM4-80GB" \
        in res.output
    res = run(cli, ["submit", "single-gpu", "-p", "mig", "--site", str(tmp_path / "mc.toml"), "--gpu-type", "1g.10gb",
                    "--dry-run", "--", "x"])
    assert res.exit_code == 0 and "#SBATCH --gpus-per-node=1g.10gb:1\n" in res.output, res.output
