"""The one validation of a site profile for jobs: :func:`check`, run by ``slurmkit site check``
(every partition) and by ``slurmkit submit`` (:func:`checked_facts`, its partition), so the
check refuses whatever submit would refuse for the same profile, and says so the same way.

It is :func:`slurmkit.profile.check.profile_findings` (fabric vs NIC link layers, interface
rules, GLOO, SHARP, EFA, GPU minors) plus what submit itself computes per partition: the
partition's facts, every GPU's CPUs for the bind wrapper and the NCCL variables. Each error
names the profile file, line (best effort) and dotted key.
"""

from __future__ import annotations

from slurmkit.profile.check import Finding, profile_findings
from slurmkit.profile.lines import key_line
from slurmkit.submit import nccl, placement
from slurmkit.submit.site import SiteError, SiteFacts, site_facts


def check(profile, partition: str | None = None, source: str = "") -> list[Finding]:
    """Findings for ``partition`` of ``profile`` (None: every partition), errors first.

    ``profile``: a loaded :class:`~slurmkit.profile.model.Profile`; ``source``: the file named in
    messages when the profile carries none. A partition that does not exist raises
    :class:`SiteError` (the caller asked for it by name)."""
    parts = [partition] if partition is not None else list(profile.partitions)
    if partition is not None:
        site_facts(profile, partition, source)          # an unknown partition: SiteError naming the known
    found = profile_findings(profile, partition)
    if any(f.level == "error" for f in found):
        return _sorted(found)                          # submit's own steps would only repeat them
    for part in parts:
        try:
            facts = site_facts(profile, part, source)
            if not facts.gpu_count:
                continue            # a CPU-only partition: no NCCL, no GPU binding (submit's templates refuse it)
            placement.gpu_cpu_map(facts, len(facts.gpus))   # as render does: [[gpus]] tables may be absent
            nccl.nccl_env(facts)
        except SiteError as exc:
            found.append(Finding("error", exc.key or f"partitions.{part}", exc.message))
    return _sorted(found)


def _sorted(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: f.level != "error")


def checked_facts(profile, partition: str | None = None, source: str = "", gpu_type: str | None = None) -> SiteFacts:
    """:func:`site_facts` (``gpu_type``: the GPU group asked for on a mixed node) after :func:`check`
    found no error for the partition; raises :class:`SiteError` (file, line, dotted key, message)
    for the first error."""
    facts = site_facts(profile, partition, source, gpu_type=gpu_type)
    errors = [f for f in check(profile, facts.partition, source) if f.level == "error"]
    if errors:
        raise error_of(profile, errors[0], source)
    return facts


def error_of(profile, finding: Finding, source: str = "") -> SiteError:
    """``finding`` as a :class:`SiteError` naming the profile file and the line that writes its key."""
    file = str(profile.source or source or "")
    return SiteError(file, _line(file, finding.key), finding.message, finding.key or None)


def _line(file: str, key: str) -> int | None:
    if not file or not key:
        return None
    try:
        with open(file, encoding="utf-8") as fh:
            return key_line(fh.read(), key)
    except OSError:
        return None
