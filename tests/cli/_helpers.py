"""Helpers shared by the CLI tests."""

from __future__ import annotations

#: --scheduler arguments that start a LocalCluster (worker processes).
LOCAL_CLUSTER_ARGS = ["--scheduler", "local-cluster"]


def run_on_a_pty(argv: list[str], timeout: float, *, react=None, after: float = 60.0) -> tuple[int, str, bool]:
    """Run ``argv`` (executable first) with a new pseudo-terminal as its terminal.

    ``react(output_so_far: bytes, fd)`` is called as output arrives until it returns True
    (e.g. after typing ^C into ``fd``); from then on the process has ``after`` seconds to end.
    Returns (exit code, output, whether react acted). A process still running at the
    deadline is killed.
    """
    import os
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        import signal

        # a terminal's process starts with default dispositions; a test runner started in the
        # background of a non-interactive shell (or under nohup) passes on ignored SIGINT,
        # SIGQUIT and SIGHUP (with SIGHUP ignored, helper processes outlive the terminal and
        # write to it after the command ended)
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.execv(argv[0], argv)
    text, acted, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        if react is not None and not acted and react(text, fd):
            acted, deadline = True, min(deadline, time.monotonic() + after)
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            text += data
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), text.decode(errors="replace"), acted
