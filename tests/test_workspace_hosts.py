"""Issue 32, finding 9 across hosts: the same workspace copied to the SAME path on two machines (a container
image or template used by two agents, a backup restored on a second host) kept one id, so on a shared store
the two read and wrote each other's rows. Two hosts are played by replacing ``host_identity``; "the same
path on two hosts" by swapping the two hosts' folders in and out of one path (the one machine's disk)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import init_repo
from store_backends import BACKENDS, backend_url

from gep.core import workspace_id
from gep.core.config import Settings
from gep.core.models import EvolutionEvent
from gep.core.workspace_id import workspace_identity
from gep.store import Store


class Hosts:
    """Which host this process plays, and each host's folder kept aside while another uses the path."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch):
        self.path, self.current = path, "host-a/aaaa"
        self.aside: dict[str, Path] = {}
        monkeypatch.setattr(workspace_id, "host_identity", lambda: self.current)

    def switch(self, host: str) -> None:
        """Put this host's own folder at the path (the other host's folder goes aside)."""
        if host == self.current:
            return
        if self.path.exists():
            self.aside[self.current] = self.path.rename(self.path.with_name(f"disk-of-{self.current}".replace("/", "-")))
        if host in self.aside:
            self.aside.pop(host).rename(self.path)
        self.current = host

    def copy_to(self, host: str) -> None:
        """The workspace copied to ``host`` at the same path (new files, as cp, tar, rsync or an image make)."""
        here = self.current
        self.switch(host)  # moves here's folder aside ...
        shutil.copytree(self.aside[here], self.path, symlinks=True)  # ... and host's copy takes the path


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request.param, tmp_path, "fleet") as u:
        yield u


def _events(path: Path, settings: Settings) -> tuple[str, list[str]]:
    with Store.for_workspace(path, settings) as s:
        return s.workspace_id, sorted(e.id for e in s.recent_events())


@pytest.mark.parametrize("local_record", [True, False], ids=["bound-locally", "image-from-an-older-gep"])
def test_the_same_path_on_two_hosts_sees_only_its_own_rows(url: str, tmp_path: Path, local_record: bool,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(database_url=url)
    ws = init_repo(tmp_path / "agent")
    hosts = Hosts(ws, monkeypatch)
    with Store.for_workspace(ws, settings) as a:
        wid_a = a.workspace_id
        a.add_event(EvolutionEvent(id="evt_a"))
    hosts.copy_to("host-b/bbbb")
    if not local_record:  # the copy carries no local binding: only the store can tell
        (ws / ".git" / "gep" / "workspace-home").unlink()
    capsys.readouterr()
    with Store.for_workspace(ws, settings) as b:
        wid_b = b.workspace_id
        assert wid_b != wid_a and b.count_events() == 0 and b.recent_events() == []
        b.add_event(EvolutionEvent(id="evt_b"))
        b.add_event(EvolutionEvent(id="evt_a"))  # the same event id is still the copy's own row
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{ws.resolve()} is a copy of the workspace at {ws.resolve()} on host-a" in err
    hosts.switch("host-a/aaaa")
    assert _events(ws, settings) == (wid_a, ["evt_a"])
    hosts.switch("host-b/bbbb")
    assert _events(ws, settings) == (wid_b, ["evt_a", "evt_b"])
    assert capsys.readouterr().err == ""  # said once; each host keeps its id from then on


def test_a_move_on_one_host_keeps_its_history(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(database_url=url)
    ws = init_repo(tmp_path / "agent")
    hosts = Hosts(ws, monkeypatch)
    with Store.for_workspace(ws, settings) as a:
        wid = a.workspace_id
        a.add_event(EvolutionEvent(id="evt_1"))
    hosts.copy_to("host-b/bbbb")  # another host has its own copy at the same path
    assert _events(ws, settings)[0] != wid
    capsys.readouterr()
    hosts.switch("host-a/aaaa")
    renamed = ws.rename(tmp_path / "renamed")  # a rename keeps the files
    assert _events(renamed, settings) == (wid, ["evt_1"])
    other_disk = tmp_path / "other-disk" / "agent"  # a move to another disk makes new files
    shutil.copytree(renamed, other_disk, symlinks=True)
    shutil.rmtree(renamed)
    assert _events(other_disk, settings) == (wid, ["evt_1"])
    shutil.copytree(other_disk, ws, symlinks=True)  # restored in place from a backup, the moved one removed
    shutil.rmtree(other_disk)
    assert _events(ws, settings) == (wid, ["evt_1"])
    assert "is a copy" not in capsys.readouterr().err


def test_one_folder_seen_from_two_hosts_or_a_renamed_host_keeps_its_id(url: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A network file system mounted by two fleet workers (the same files, even at another mount path), and
    a machine whose hostname changed, are the same workspace; a copy made from the shared folder is not."""
    settings = Settings(database_url=url)
    ws = init_repo(tmp_path / "nfs" / "agent")
    hosts = Hosts(ws, monkeypatch)
    with Store.for_workspace(ws, settings) as a:
        wid = a.workspace_id
        a.add_event(EvolutionEvent(id="evt_a"))
    hosts.current = "worker-2/cccc"  # the other worker, same files
    with Store.for_workspace(ws, settings) as b:
        assert b.workspace_id == wid
        b.add_event(EvolutionEvent(id="evt_b"))
    hosts.current = "host-a/aaaa"
    assert _events(ws, settings) == (wid, ["evt_a", "evt_b"])
    hosts.current = "host-a-renamed/aaaa"
    assert _events(ws, settings) == (wid, ["evt_a", "evt_b"])
    hosts.current = "host-a/aaaa"
    assert workspace_identity(ws).id == wid
    hosts.copy_to("host-d/dddd")  # a copy of the shared folder onto a host's own disk
    assert _events(ws, settings)[0] != wid


def test_the_local_binding_alone_tells_a_copy_from_another_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Without a store (or before it is opened) the id file's own record finds the copy."""
    ws = init_repo(tmp_path / "agent")
    hosts = Hosts(ws, monkeypatch)
    wid = workspace_identity(ws).id
    hosts.current = "host-b/bbbb"  # the same files seen from another host
    assert workspace_identity(ws).id == wid
    hosts.current = "host-a/aaaa"
    assert workspace_identity(ws).id == wid
    capsys.readouterr()
    hosts.copy_to("host-c/cccc")
    copy = workspace_identity(ws)
    assert copy.id != wid and copy.copied_from == f"{ws.resolve()} on host-a"
    assert f"{ws.resolve()} is a copy of the workspace at {ws.resolve()} on host-a" in capsys.readouterr().err
    assert workspace_identity(ws).id == copy.id
