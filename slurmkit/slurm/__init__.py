"""The one place that runs Slurm's command-line tools (sbatch, squeue, sacct, sacctmgr, scontrol,
sinfo, sreport) and reads or edits slurm.conf. Everything else in slurmkit works on plain data."""
