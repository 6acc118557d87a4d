"""slurmkit.slurm's one reader per Slurm format: TRES strings (slurm.tres), GRES specifications
(slurm.gres), durations (slurm.duration), memory sizes (slurm.memory).

The values below are real: each is quoted from the capture of ../shared/corpus named beside it
(README.md there gives their sources); every value of those captures is read too
(corpus_values.py gathers them with slurmkit's own readers). Edge cases and bad input after.
"""

from __future__ import annotations

import math

import pytest

from slurmkit.errors import InputError
from slurmkit.slurm import duration, gres, memory, tres

from corpus_values import durations, gres_specs, memory_sizes, tres_strings

# --- TRES -------------------------------------------------------------------------------------

HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"


@pytest.mark.parametrize("text, gpus, gtype, where", [
    ("billing=1,cpu=1,gres/gpu=1,mem=10G,node=1", 1, "", HABROK),                         # AllocTRES, untyped
    ("billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=32G,node=1", 2, "a100", HABROK),      # typed and untyped
    ("billing=1,cpu=1,mem=1000M,node=1", None, "", HABROK),                                # a CPU job: no gres/gpu
    ("cpu=64,mem=514404M,billing=64,gres/gpu=4,gres/gpu:a100=4", 4, "a100",
     "slurm/habrok_scontrol_show_nodes.txt"),                                               # CfgTRES
    ("cpu=128,mem=514542M,billing=128", None, "", "slurm/habrok_scontrol_show_nodes.txt"),
])
def test_gpu_count_of_real_tres_strings(text, gpus, gtype, where):
    assert tres.gpu_count(text) == gpus, where
    assert tres.gpu_type(text) == gtype


def test_usage_tres_values_and_units():
    # TRESUsageInTot of a step (sacct/habrok_gpu_cluster_parsable2.psv, real; sacct without
    # --noconvert: gres/gpumem with a unit)
    text = "cpu=00:05:32,energy=0,fs/disk=2093543,gres/gpumem=37956M,gres/gpuutil=54,mem=1294440K,pages=0,vmem=1351652K"
    assert tres.number(text, "gres/gpuutil") == 54.0 and tres.number(text, "energy") == 0.0
    assert tres.mem_mib(text, "gres/gpumem") == 37956.0
    assert tres.mem_mib(text, "mem") == pytest.approx(1294440 / 1024)
    assert tres.gpu_count(text) is None            # gres/gpumem and gres/gpuutil are not GPUs
    assert tres.number(text, "gres/gpu") is None and tres.number(text, "swap") is None
    with pytest.raises(tres.TresError, match="not a number"):
        tres.number(text, "cpu")                    # a duration: not a plain number
    assert tres.numbers("cpu=8,mem=16000M,gres/gpu=4") == {"cpu": 8.0, "gres/gpu": 4.0}
    # energy= in AllocTRES (sacct/cscs_energy_parsable2.psv)
    assert tres.number("billing=256,cpu=256,energy=5231064,mem=1000G,node=4", "energy") == 5231064.0


def test_mig_instances_and_shards_count_as_sreport_counts_them():
    """sreport -T gres/gpu counts each allocated gres/gpu as one, a MIG instance included
    (Slurm's gres names for MIG: nvidia-smi's profile, optionally prefixed with the GPU)."""
    assert tres.gpu_count("cpu=2,gres/gpu:a100_3g.20gb=1,gres/gpu=1,mem=8G") == 1
    assert tres.gpu_count("gres/gpu:nvidia_a100_3g.20gb=2,gres/gpu:nvidia_a100_1g.5gb=3") == 5
    assert tres.gpu_type("gres/gpu:nvidia_a100_3g.20gb=2") == "nvidia_a100_3g.20gb"
    assert tres.gpu_count("cpu=1,gres/shard=4,gres/shard:a100=4") is None     # shards are not GPUs
    assert tres.numbers("cpu=1,gres/gpu:1g.10gb=2") == {"cpu": 1.0, "gres/gpu:1g.10gb": 2.0, "gres/gpu": 2.0}


def test_tres_edge_cases_and_bad_input():
    assert tres.parse("") == {} and tres.parse(None) == {} and tres.parse("N/A") == {}
    assert tres.parse("cpu=1,cpu=2") == {"cpu": "1"}          # the first value of a repeated key
    assert tres.gpu_count("gres/gpu=0") == 0                    # 0 GPUs, not unknown
    with pytest.raises(tres.NegativeGpuCount, match="negative GPU count"):
        tres.gpu_count("cpu=4,gres/gpu=-1")
    with pytest.raises(tres.TresError, match="not key=value") as err:
        tres.parse("cpu=4,gpu", source="AllocTRES")
    assert str(err.value).startswith("AllocTRES: ") and isinstance(err.value, InputError)
    with pytest.raises(tres.TresError, match="not a GPU count"):
        tres.gpu_count("gres/gpu=two")


def test_every_corpus_tres_string_reads(corpus):
    values = tres_strings(corpus)
    assert len(values) > 200
    for v in values:
        entries = tres.parse(v)
        assert entries and all(k and "," not in k for k in entries)
        n = tres.gpu_count(entries)
        assert n is None or n >= 0


# --- GRES specifications ----------------------------------------------------------------------

def test_gres_specs():
    # sinfo GRES (slurm/sinfo_gres.txt); slurm.conf Gres= (sites/ocotillo_slurm.conf)
    assert gres.parse("gpu:gen:8(S:0-1)") == {("gpu", "gen"): 8}
    assert gres.gpu_count("gpu:gtx970:1,gpu:gtx1060:1") == 2
    assert gres.parse("gpu:h100:8,gpu:2(S:0-1),shard:16,mps:1K") == {
        ("gpu", "h100"): 8, ("gpu", None): 2, ("shard", None): 16, ("mps", None): 1024}
    assert gres.parse("gpu:tesla:2(IDX:0,2)") == {("gpu", "tesla"): 2}     # a comma inside ()
    assert gres.parse("(null)") == {} and gres.gpu_count("N/A") == 0
    assert gres.count("4G") == 4 * 1024 ** 3
    with pytest.raises(gres.GresSpecError, match="not a count"):
        gres.parse("gpu:h100:many")


def test_every_corpus_gres_spec_reads(corpus):
    assert {gres.gpu_count(v) for v in gres_specs(corpus)} == {2, 8}


# --- durations --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, bare, secs", [
    ("1-04:03:36", "s", 86400 + 4 * 3600 + 3 * 60 + 36),   # Elapsed (habrok)
    ("00:00.062", "s", 0.062),                        # TotalCPU under an hour (habrok)
    ("14-00:00:00", "min", 14 * 86400),               # sinfo TIMELIMIT (slurm/sinfo_gres.txt)
    ("5:00", "min", 300),                             # sinfo DEFAULTTIME: MM:SS
    ("Partition_Limit", "min", math.inf),             # Timelimit (sacct2/trex_sacct_-X_-P_--format_ALL.psv)
    ("90", "min", 5400), ("90", "s", 90),             # sbatch --time=90; ElapsedRaw
    ("1-12", "min", 129600), ("1-12:30", "min", 131400), ("2-03:04:05", "min", 183845),
    ("UNLIMITED", "min", math.inf), ("infinite", "min", math.inf),
    ("4294967295", "min", math.inf), ("4294967295", "s", 4294967295),   # TimelimitRaw's INFINITE
    ("INVALID", "s", None), ("", "s", None), ("Unknown", "min", None),
])
def test_durations(text, bare, secs):
    got = duration.seconds(text, bare)
    assert got == (pytest.approx(secs) if isinstance(secs, float) and math.isfinite(secs) else secs)


@pytest.mark.parametrize("text", ["1:2:3:4", "-5", "1h", "1-", "1-2:3:4:5", "1.5", "1-02.5", "a:00"])
def test_bad_durations_say_what_was_expected(text):
    with pytest.raises(duration.DurationError) as err:
        duration.seconds(text, source="Timelimit")
    assert str(err.value).startswith("Timelimit: ") and isinstance(err.value, InputError)


def test_every_corpus_duration_reads(corpus):
    found = durations(corpus)
    assert len(found["s"]) > 300 and "Partition_Limit" in found["min"]
    for bare, values in found.items():
        for v in values:
            s = duration.seconds(v, bare)
            assert s is None or s >= 0


# --- memory sizes -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, bare, want", [
    ("16000Mn", "M", (16000.0, "node")),              # ReqMem, old per-node form (sacct2/mavis...)
    ("0n", "M", (0.0, "node")),                       # ReqMem (sacct/pcluster_issue59_node_fail.psv)
    ("199G", "M", (199 * 1024.0, "")), ("4000Mc", "M", (4000.0, "cpu")),
    ("1294440K", "B", (1294440 / 1024, "")),          # MaxRSS (habrok)
    ("2048", "B", (2048 / 1048576, "")), ("2048", "M", (2048.0, "")),
    ("1.5T", "M", (1.5 * 1048576, "")), ("2P", "M", (2 * 1073741824.0, "")),
    ("", "M", None),
])
def test_memory_sizes(text, bare, want):
    got = memory.mib(text, bare)
    assert got == (None if want is None else (pytest.approx(want[0]), want[1]))


@pytest.mark.parametrize("text", ["5KK", "12\u00e9", "-1G", "G", "1.G", "1,5G"])
def test_bad_memory_sizes_say_what_was_expected(text):
    with pytest.raises(memory.MemorySizeError, match="not a memory size") as err:
        memory.mib(text, source="ReqMem")
    assert str(err.value).startswith("ReqMem: ")


def test_every_corpus_memory_size_reads(corpus):
    found = memory_sizes(corpus)
    assert "16000Mn" in found["M"] and "1294440K" in found["B"]
    for bare, values in found.items():
        for v in values:
            mib, per = memory.mib(v, bare)
            assert mib >= 0 and per in ("", "node", "cpu")


# --- gres.conf records ------------------------------------------------------------------------

def test_gres_conf_records_of_real_files(corpus):
    from slurmkit.slurm import gres_conf

    # slurm/gres.conf.dgx1: File= per GPU, the deprecated CPUs=
    dgx1 = gres_conf.load(corpus / "slurm" / "gres.conf.dgx1")
    assert [(r.line, r.name, r.files, r.cores) for r in dgx1[3:5]] == [
        (4, "gpu", ("/dev/nvidia3",), "0-19,40-59"), (5, "gpu", ("/dev/nvidia4",), "20-39,60-79")]
    assert all(r.nodes is None and r.type is None and r.count is None and r.units() == 1 for r in dgx1)
    # sites/ocotillo_gres.conf: lower-case Nodename=, tabs, File= ranges, a hostlist
    oco = gres_conf.load(corpus / "sites" / "ocotillo_gres.conf")
    assert (oco[0].nodes, oco[0].type, oco[0].files, oco[0].units()) == (
        ("ibnodo1", "ibnodo2"), "m2070q", tuple(f"/dev/nvidia{i}" for i in range(4)), 4)
    assert oco[0].applies_to("ibnodo2") and not oco[0].applies_to("ibtesla")
    # sites/magic_castle-27_*: AutoDetect=nvml and bare Name=gpu lines
    mc = gres_conf.load(corpus / "sites" / "magic_castle-27_gres.conf_autodetect-nvml_duplicate-Name-gpu.conf")
    assert gres_conf.autodetect(mc, "any") == "nvml" and [r.name for r in mc if r.name] == ["gpu", "gpu"]


def test_gres_conf_record_keys_and_errors(tmp_path):
    from slurmkit.slurm import gres_conf

    # edit (labelled) of a MIG line as site-profile.md's gres.conf shows it, with Links= and Flags=
    recs = gres_conf.parse("NodeName=mig1 Name=gpu Type=nvidia_a100_3g.20gb "
                           "MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21 Cores=0-1 Links=-1,0 "
                           "Flags=nvidia_gpu_env\nNodeName=mig1 Name=shard Count=1K\n")
    mig, shard = recs
    assert (mig.multiple, mig.files, mig.units(), mig.links, mig.flags, mig.cores) == (
        True, ("/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21"), 1, "-1,0", "nvidia_gpu_env", "0-1")
    assert (shard.count, shard.units()) == (1024, 1024)
    for text, why in (("Name=gpu File=/dev/nvidia[0-\n", "bad File= range"),
                      ("NodeName=n[1- Name=gpu\n", "bad NodeName hostlist"),
                      ("Name=gpu Count=eight\n", "Count='eight': not a count"),
                      ("Include other.conf\n", "Include in a gres.conf text")):
        with pytest.raises(gres_conf.GresConfError, match=why) as err:
            gres_conf.parse(text, "/etc/slurm/gres.conf")
        assert err.value.line == 1 and str(err.value).startswith("/etc/slurm/gres.conf:1:")
    with pytest.raises(gres_conf.GresConfError, match="does not exist"):
        gres_conf.load(tmp_path / "gres.conf")


def test_request_forms_of_every_release_and_bad_ones():
    """tres.parse_request: the forms of tests/fixtures/slurm/*/job_desc.txt, and what it refuses."""
    assert tres.parse_request("gres:gpu:h100:2") == tres.parse_request("gres/gpu:h100:2") == {"gres/gpu:h100": "2"}
    assert tres.parse_request("gres/gpu=1") == tres.parse_request("gres:gpu:1") == {"gres/gpu": "1"}
    assert tres.parse_request("cpu=4,gres/gpu=1") == {"cpu": "4", "gres/gpu": "1"}
    assert tres.parse_request("gres/shard") == {"gres/shard": "1"} and tres.parse_request("(null)") == {}
    for bad in ("gres/", "gpu", "gres/gpu=", "cpu="):
        with pytest.raises(tres.TresError, match="is not a resource request"):
            tres.parse_request(bad)
