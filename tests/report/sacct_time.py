"""An independent reading of sacct's times for tests (not slurmkit's parser): what the tests
compare slurmkit's figures with."""


def seconds(text: str) -> float:
    """sacct's ``[D-][HH:]MM:SS[.mmm]`` (Elapsed, TotalCPU, Timelimit) as seconds."""
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
