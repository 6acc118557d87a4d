"""Where the hooks read slurm.conf and gres.conf: where slurmd on this node reads them.

slurm.conf, the first of these that is a file:

1. ``SLURM_CONF`` in the hook's environment: slurmd sets it for the prolog and epilog to the file
   it reads itself (on a configless node its cache, e.g.
   ``/var/spool/slurmd/conf-cache/slurm.conf``);
2. the hooks config's ``slurm_conf`` (install writes the path of the slurm.conf it edited);
3. slurmd's configless cache: the hooks config's ``conf_cache`` (``%n`` / ``%h`` expanded to the
   node and host name, as slurmd expands ``SlurmdSpoolDir``), else ``/run/slurm/conf`` (the link
   slurmd makes to its cache) and ``/var/spool/slurmd/conf-cache`` (the default ``SlurmdSpoolDir``
   and its ``conf-cache``: src/slurmd/slurmd/slurmd.c ``_read_config``). HealthCheckProgram runs
   without ``SLURM_CONF``, so on a configless node this is where its slurm.conf is found.

gres.conf: the hooks config's ``gres_conf`` when it names one that is a file, else the
``gres.conf`` beside the slurm.conf found (slurmd reads it from the directory of its slurm.conf:
in configless mode its cache holds both; none found: beside each candidate above). ``Include``d
files are followed by the readers (:func:`slurmkit.slurm.conf.read_lines`), relative to the
including file.

Standard library only, no pathlib (every hook run calls :func:`locate`). Reads only ``stat``.
"""

from __future__ import annotations

import os

from slurmkit.records import record

#: slurmd's conf cache where the hooks config names none: the link slurmd makes to it, and the
#: default ``SlurmdSpoolDir`` (``/var/spool/slurmd``) with its ``conf-cache``.
DEFAULT_CONF_CACHES = ("/run/slurm/conf", "/var/spool/slurmd/conf-cache")


@record(frozen=True)
class ConfPaths:
    """The files a hook run reads: ``slurm_conf`` / ``gres_conf`` (paths; None when no candidate
    is a file), ``looked_slurm`` / ``looked_gres`` (every candidate looked at, in order: for
    the messages when one is missing)."""

    slurm_conf: str | None
    gres_conf: str | None
    looked_slurm: tuple
    looked_gres: tuple


def expand_slurmd_path(path: str, node: str, host: str | None = None) -> str:
    """``path`` with ``%n`` (the node name) and ``%h`` (the host name; default the node name)
    replaced, as slurmd expands ``SlurmdSpoolDir`` (``slurm_conf_expand_slurmd_path``)."""
    return path.replace("%n", node).replace("%h", host or node)


def conf_cache_dirs(conf_cache: str | None, node: str) -> tuple[str, ...]:
    """The directories slurmd may keep its configless cache in: the hooks config's
    ``conf_cache`` (expanded: :func:`expand_slurmd_path`) when set, else
    :data:`DEFAULT_CONF_CACHES`."""
    if conf_cache:
        return (expand_slurmd_path(conf_cache, node, os.uname().nodename.split(".")[0]),)
    return DEFAULT_CONF_CACHES


def locate(env, slurm_conf: str | None, gres_conf: str | None, conf_cache: str | None,
           node: str) -> ConfPaths:
    """The slurm.conf and gres.conf of this node, by the rules of the module docstring:
    ``env`` (the hook's environment), ``slurm_conf`` / ``gres_conf`` / ``conf_cache`` (the
    hooks config's values, None when unset), ``node`` (the Slurm node name). Raises nothing."""
    slurm = []
    for p in (env.get("SLURM_CONF"), slurm_conf,
              *(os.path.join(d, "slurm.conf") for d in conf_cache_dirs(conf_cache, node))):
        if p and p not in slurm:
            slurm.append(p)
    found = next((p for p in slurm if os.path.isfile(p)), None)
    gres = [gres_conf] if gres_conf else []
    for p in [found] if found else slurm:  # slurmd reads the gres.conf beside its slurm.conf
        g = os.path.join(os.path.dirname(p), "gres.conf")
        if g not in gres:
            gres.append(g)
    return ConfPaths(found, next((p for p in gres if os.path.isfile(p)), None), tuple(slurm), tuple(gres))
