"""The user's repository: opening it (one-line refusals), where the engine keeps its files, identity."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gep.core.config import gep_dir
from gep.core.errors import WorkspaceError
from gep.git.plumbing import Git, base_env, shown

GEP_DIR = ".gep"
ENGINE_NAME = "gep"
ENGINE_EMAIL = "gep@localhost"


class Repo(BaseModel):
    """A non-bare git repository opened at the top of its work tree, with at least one commit."""

    model_config = ConfigDict(frozen=True)

    path: Path
    git_dir: Path
    common_dir: Path
    object_format: str = "sha1"

    def git(self) -> Git:
        return Git(self.path, git_dir=self.git_dir, work_tree=self.path, where=str(self.path))

    @property
    def hexlen(self) -> int:
        return 64 if self.object_format == "sha256" else 40

    @property
    def gep_dir(self) -> Path:
        return gep_dir(self.path)  # a .gep symlink out of the workspace is refused

    def engine_dir(self, name: str) -> Path:
        """``.gep/<name>/``, created (and ``.gep/`` kept out of git)."""
        ensure_gep_dir(self)
        d = self.gep_dir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def head(self) -> str:
        sha = self.git().sha("HEAD^{commit}")
        if sha is None:
            raise WorkspaceError(f"workspace {shown(self.path)} has no commit yet; commit once before evolving it")
        return sha

    def head_ref(self) -> str | None:
        """The ref HEAD points at (``refs/heads/main``), None when detached."""
        res = self.git().run("symbolic-ref", "-q", "HEAD", ok=True)
        return res.line() or None if res.ok else None


PROBED = ("--show-toplevel", "--absolute-git-dir", "--git-common-dir", "--show-object-format")


def _probe(p: Path) -> tuple[str, str, str, str] | None:
    """(work tree top, git dir, common dir, object format), None when ``p`` is in no repository."""
    g = Git(p)
    bare = g.run("rev-parse", "--is-bare-repository", ok=True)
    if not bare.ok:
        return None
    if bare.line() == "true":
        raise WorkspaceError(f"workspace {shown(p)} is a bare git repository; it needs a working tree")
    # One call for the four, one value a line (a cycle opens the workspace three times: each git call
    # counts). A value with a newline in it (the workspace path itself may have one) makes more lines than
    # values, and an old git without --show-object-format fails: then one call per value, as before.
    both = g.run("rev-parse", *PROBED, ok=True)
    values = both.text.removesuffix("\n").split("\n")
    if both.ok and len(values) == len(PROBED):
        return values[0], values[1], values[2], values[3] or "sha1"
    top, git_dir, common = (g.run("rev-parse", opt).text.removesuffix("\n") for opt in PROBED[:3])
    return top, git_dir, common, g.run("rev-parse", PROBED[3], ok=True).line() or "sha1"


def open_repo(path: Path | str) -> Repo:
    """The repository whose work tree top is ``path``; a one-line WorkspaceError otherwise."""
    p = Path(path).expanduser()
    if not p.exists():
        raise WorkspaceError(f"workspace {shown(p)} does not exist")
    if not p.is_dir():
        raise WorkspaceError(f"workspace {shown(p)} is not a directory")
    p = p.resolve()
    found = _probe(p)
    if found is None:
        raise WorkspaceError(f"workspace {shown(p)} is not a git repository (run `git init` and commit once)")
    top, git_dir, common, fmt = found
    if Path(top).resolve() != p:
        raise WorkspaceError(f"workspace {shown(p)} is inside the git repository {shown(top)}; "
                             "point --workspace at the repository's top directory")
    common_dir = Path(common) if Path(common).is_absolute() else (p / common)
    repo = Repo(path=p, git_dir=Path(git_dir), common_dir=common_dir.resolve(), object_format=fmt)
    repo.head()
    return repo


def ensure_gep_dir(repo: Repo) -> Path:
    """Create ``.gep/`` and keep it out of git (``info/exclude``), so it is never committed."""
    repo.gep_dir.mkdir(exist_ok=True)
    exclude = repo.common_dir / "info" / "exclude"
    data = exclude.read_bytes() if exclude.exists() else b""
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines()]
    if not any(ln in (".gep", ".gep/", "/.gep", "/.gep/") for ln in lines):
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("ab") as fh:
            fh.write(b"" if not data or data.endswith(b"\n") else b"\n")
            fh.write(f"/{GEP_DIR}/\n".encode())
    return repo.gep_dir


def ensure_state_dir(repo: Repo) -> Path:
    """``<workspace>/.gep/``, or a one-line WorkspaceError when it cannot be created (read-only, a file)."""
    try:
        return ensure_gep_dir(repo)
    except OSError as exc:
        raise WorkspaceError(f"cannot write engine state in {shown(repo.path / '.gep')}: "
                             f"{exc.strerror or type(exc).__name__}") from None


def identity_env(repo: Repo) -> dict[str, str]:
    """The repository's configured identity, or the engine's when none is set (never written to config)."""
    found = repo.git().config_values(("user.name", "user.email"))
    if (found.get("user.name") or "").strip() and (found.get("user.email") or "").strip():
        return {}
    return {"GIT_AUTHOR_NAME": ENGINE_NAME, "GIT_AUTHOR_EMAIL": ENGINE_EMAIL,
            "GIT_COMMITTER_NAME": ENGINE_NAME, "GIT_COMMITTER_EMAIL": ENGINE_EMAIL}


def operation_in_progress(repo: Repo) -> str | None:
    for name, what in (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase"),
                       ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert")):
        if (repo.git_dir / name).exists():
            return what
    return None


__all__ = ["Repo", "open_repo", "ensure_gep_dir", "ensure_state_dir", "identity_env", "operation_in_progress", "base_env"]
