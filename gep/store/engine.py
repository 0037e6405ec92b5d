"""Engines (SQLite in WAL mode with writers that lock up front; any other URL as is) and one-line errors."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import event as sa_event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import create_engine

from gep.core.errors import StoreError
from gep.store.codec import first_line
from gep.store.schema import SQLITE_PRAGMAS, default_db

P = ParamSpec("P")
R = TypeVar("R")

# the connection info key that makes the SQLite "begin" hook take the write lock (see _sqlite_begin)
WRITE_FLAG = "gep_write"


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # We issue BEGIN ourselves (see _sqlite_begin), so the driver must not.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    for pragma in SQLITE_PRAGMAS:
        cur.execute(pragma)
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    # Writers take the write lock up front: a deferred transaction that reads and then writes can fail at
    # once with SQLITE_BUSY when another process committed in between (busy_timeout does not retry that).
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get(WRITE_FLAG) else "BEGIN")


def default_url(workspace: Path | str) -> str:
    return f"sqlite:///{default_db(workspace)}"


def make_engine(url: str) -> Engine:
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        sa_event.listen(engine, "connect", _sqlite_connect)
        sa_event.listen(engine, "begin", _sqlite_begin)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    return engine


def scrub(message: str, url: str) -> str:
    """Remove the URL's password from a driver message (some drivers echo the DSN)."""
    try:
        password = make_url(url).password
    except (ArgumentError, ValueError):  # a malformed URL has no password to hide
        password = None
    if password:
        message = message.replace(str(password), "***")
    return message


def safe_url(url: str) -> str:
    """The URL without its password, for error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # a malformed URL (ValueError: a port that is not a number)
        return "<malformed database URL>"


def db_error(url: str, exc: BaseException, doing: str = "store") -> StoreError:
    """A one-line StoreError for a database failure, password removed."""
    return StoreError(f"{doing} {safe_url(url)}: {scrub(first_line(exc), url)}")


def store_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn database failures inside a store method (first argument: the store) into a one-line StoreError."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            raise db_error(str(getattr(args[0], "url", "")), exc) from None

    return wrapper
