"""``python -m <tool>`` run with the tool resolved outside the tree, and whether a module is installed at all.

``python -m pytest`` puts the working directory first on ``sys.path``, so a ``pytest.py`` (or ``pytest/``) a change
adds at the tree's root stood in for pytest: it exited 0 and a broken change passed validation, or it printed
"No module named pytest" and the failure was blamed on the host (issue 45, C01 and C03). The runner therefore
runs ``python [options] -m X args`` as ``python [options] -c PINNED X args``: ``PINNED`` takes the tree off
``sys.path``, imports X's top-level package from the environment when it is installed there (its own imports,
``_pytest`` and pluggy, come from there too), puts the tree back where it was and runs X as ``-m`` would
(``runpy``). A module that is only the tree's own (``python -m mypkg``) still runs from the tree.

Whether X is installed is asked of the sandbox, not of the command's words: after a failed ``-m`` command the
runner runs ``PROBE`` (no code of the tree runs: only finders look at file names) and records the module as
missing only when it resolves neither in the environment nor in the tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from gep.validation.allowlist import PYTHONS

# the tree's entries of sys.path: "" (-c), the working directory and anything under it (PYTHONPATH=src)
_TREE_ENTRIES = (
    "import importlib, importlib.util, os, runpy, sys\n"
    "cwd = os.getcwd()\n"
    "def _in_tree(p):\n"
    "    a = os.path.abspath(p or '.')\n"
    "    return a == cwd or a.startswith(cwd + os.sep)\n"
    "tree = [(i, p) for i, p in enumerate(sys.path) if _in_tree(p)]\n"
    "sys.path[:] = [p for p in sys.path if not _in_tree(p)]\n"
    "name = sys.argv[1]\n"
    "top = name.partition('.')[0]\n"
    "installed = importlib.util.find_spec(top) is not None\n"
)
_PUT_BACK = "for i, p in tree:\n    sys.path.insert(i, cwd if p == '' else p)\n"

PINNED = (_TREE_ENTRIES
          + "if installed:\n    importlib.import_module(top)\n"
          + _PUT_BACK
          + "del sys.argv[0]\n"
          + "if not installed and importlib.util.find_spec(top) is None:\n"
          + "    sys.exit(f'{sys.executable}: No module named {name}')\n"
          + "runpy.run_module(name, run_name='__main__', alter_sys=True)\n")

PROBE_MARK = "GEP-MODULE"
PROBE = (_TREE_ENTRIES
         + _PUT_BACK
         + "found = installed or importlib.util.find_spec(top) is not None\n"
         + f"print({PROBE_MARK!r}, 'found' if found else 'missing')\n")


def module_call(argv: Sequence[str]) -> tuple[int, str] | None:
    """(index of ``-m``, module) when ``argv`` is ``python [options] -m <module> ...``, else None."""
    if not argv or not PYTHONS.match(argv[0].rsplit("/", 1)[-1]):
        return None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return (i, argv[i + 1]) if i + 1 < len(argv) else None
        if not a.startswith("-") or a == "--" or a.startswith("-c"):
            return None
        i += 2 if a in ("-W", "-X") else 1
    return None


def pinned(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``-m <module>`` run through ``PINNED`` (the tool from the environment), else as it is."""
    call = module_call(argv)
    if call is None:
        return list(argv)
    i, module = call
    return [*argv[:i], "-c", PINNED, module, *argv[i + 2:]]


def probe_argv(argv: Sequence[str]) -> list[str] | None:
    """The interpreter and options of a ``-m`` command running ``PROBE`` for its module, or None."""
    call = module_call(argv)
    if call is None:
        return None
    i, module = call
    return [*argv[:i], "-c", PROBE, module.partition(".")[0]]
