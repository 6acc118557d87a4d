"""Mailing the weekly report: one MIME message (the Markdown as text, the HTML page as its
alternative) piped to ``sendmail -t -oi``."""

from __future__ import annotations

import os
import shutil
import subprocess
from email.message import EmailMessage
from pathlib import Path

from slurmkit.errors import SlurmkitError


def mail_report(report: dict, html_path, addr: str, timeout: float = 60.0) -> None:
    """Send ``report`` to ``addr``: subject :func:`slurmkit.report.render.title`, the Markdown
    rendering as text and, when ``html_path`` (the written ``weekly.html``) is given, that page
    as the HTML part. ``From``: ``$SLURMKIT_MAIL_FROM`` (default ``slurmkit``). ``timeout`` in s.

    Raises :class:`~slurmkit.errors.SlurmkitError` when there is no sendmail on this host or it
    exits non-zero (its stderr in the message).
    """
    from slurmkit.report import render

    msg = EmailMessage()
    msg["Subject"] = render.title(report)
    msg["To"] = addr
    msg["From"] = os.environ.get("SLURMKIT_MAIL_FROM", "slurmkit")
    msg.set_content(render.to_markdown(report))
    if html_path is not None:
        msg.add_alternative(Path(html_path).read_text(encoding="utf-8"), subtype="html")
    sendmail = shutil.which("sendmail") or shutil.which("sendmail", path="/usr/sbin:/usr/lib")
    if not sendmail:
        raise SlurmkitError("--mail-to: no sendmail on this host (install an MTA, e.g. msmtp-mta)")
    proc = subprocess.run([sendmail, "-t", "-oi"], input=msg.as_bytes(), capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise SlurmkitError(f"sendmail failed (exit {proc.returncode}): "
                            f"{proc.stderr.decode(errors='replace').strip()}")
