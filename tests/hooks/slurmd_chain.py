"""Run a ``Prolog=`` / ``Epilog=`` value the way slurmd 22.05+ runs it, for install's layout tests.

From Slurm's src/plugins/prep/script/prep_script_slurmd.c (22.05 .. 23.x): ``_script_list_create``
expands the value with ``glob(pattern, GLOB_ERR, ...)`` (sorted, C order under slurmd's locale) and
``list_push``es each match, so the list is in *reverse* sorted order; ``list_for_each`` calls
``_run_subpath_command`` on each, which returns -1 on a non-zero status and so stops the loop;
the prolog's status is that script's. ``argv[0]`` is the script path and the environment is only
what ``_build_env`` sets (no PATH, no HOME). A value without wildcards matches itself (glob of a
plain path that exists). Written here independently of ``slurmkit.hooks.install.slurmd_order``.
"""

import glob
import os
import subprocess


def slurmd_env(node: str = "n1", job_id: str = "4242", conf: str = "/etc/slurm/slurm.conf",
               epilog: bool = False) -> dict:
    """The environment ``_build_env`` gives a prolog (the keys a credential-less test can set)."""
    env = {"SLURMD_NODENAME": node, "SLURM_CONF": conf, "SLURM_CLUSTER_NAME": "test", "SLURM_JOB_ID": job_id,
           "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0", "SLURM_JOB_WORK_DIR": "/tmp", "SLURM_JOB_USER": "root",
           "SLURM_JOBID": job_id, "SLURM_UID": "0", "SLURM_NODELIST": node,
           "SLURM_SCRIPT_CONTEXT": "epilog_slurmd" if epilog else "prolog_slurmd"}
    return env


def run_like_slurmd(value: str, env: dict, timeout: float = 60) -> tuple[int, list[str], str]:
    """Run ``value``: ``(status, scripts started in order, their stderr joined)``. A run that
    does not end within ``timeout`` (an endless chain) raises subprocess.TimeoutExpired."""
    matches = glob.glob(value)
    order = []
    for m in sorted(matches, key=os.fsencode):
        order.insert(0, m)  # list_push: onto the front
    ran, err = [], []
    for path in order:
        ran.append(path)
        r = subprocess.run([path], env=env, capture_output=True, text=True, timeout=timeout, cwd="/")
        err.append(r.stderr)
        if r.returncode != 0:
            return r.returncode, ran, "".join(err)
    return 0, ran, "".join(err)
