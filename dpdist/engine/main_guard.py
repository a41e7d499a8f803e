"""Would starting worker processes now re-run the caller's script?

Worker processes started with multiprocessing "spawn" (the ``"local-cluster"`` and
``"processes"`` schedulers) re-import the main script. When that would re-run the fit (a
script without an ``if __name__ == "__main__":`` guard, or code piped to ``python -``), the
fit is refused in one line before any process starts (:func:`spawn_problem` says why).
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys

__all__ = ["spawn_problem"]


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either order), possibly inside an ``and``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_guard(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, test.comparators[0]]
        names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
        consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
        return bool(names and consts)
    return False


def _line_is_guarded(source: str, lineno: int) -> bool:
    """Whether line ``lineno`` of a module lies inside an ``if __name__ == "__main__":`` body."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # cannot tell: do not stand in the way
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body:
            first, last = node.body[0].lineno, max(getattr(n, "end_lineno", n.lineno) for n in node.body)
            if first <= lineno <= last:
                return True
    return False


def spawn_problem() -> str | None:
    """Why worker processes started now with multiprocessing "spawn" would fail, or None.

    Spawned processes re-import the main module (as ``__mp_main__``) before they run
    anything. That re-runs the caller's script when the call that starts them is executed
    at its top level outside an ``if __name__ == "__main__":`` guard, and cannot work at
    all for code read from standard input. (Notebooks, ``python -c`` and ``python -m
    package`` have nothing to re-import.) This mirrors ``multiprocessing.spawn``'s rules.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        return "this process is itself a worker process re-importing the main script"
    main = sys.modules.get("__main__")
    if main is None:
        return None
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    if spec_name is not None and (spec_name == "__main__" or spec_name.endswith(".__main__")):
        return None
    path = getattr(main, "__file__", None)
    if path is None:
        return None
    if spec_name is None and not os.path.isabs(path):
        from multiprocessing import process

        if process.ORIGINAL_DIR is not None:
            path = os.path.join(process.ORIGINAL_DIR, path)
    if os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    if not os.path.isfile(path):
        return (
            f"they cannot re-import a main program that is not a file ({getattr(main, '__file__', path)!r}: "
            'code piped to `python -`?): save the code to a file and put the fit under `if __name__ == "__main__":`, '
            "or use the default scheduler (threads)"
        )
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None  # not called while the main module's top level runs
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError:
        return None
    if _line_is_guarded(source, frame.f_lineno):
        return None
    return (
        f"they re-import {os.path.basename(path)} and would run its line {frame.f_lineno} again: put the code "
        'that fits under `if __name__ == "__main__":`, or use the default scheduler (threads)'
    )

