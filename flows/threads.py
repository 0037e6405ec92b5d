"""A blocking call awaited from an async flow without holding its event loop: what lets a fleet run here
(flows/fleet.py) run its cycles at once.

The engine's pipeline is blocking code (git, the store, the agent, the sandbox). An async cycle flow that
called it directly would stall the loop, and the fleet's other cycles with it. A fleet run here sets
``IN_THREAD`` for its cycles; each then runs its pipeline in a thread of its own, with a copy of the
run's context (Prefect's flow-run context, so its stages are still task runs of the cycle's run).

What the threads share was checked: each cycle opens its own store (its own engine and sessions; SQLite
engines allow use from any thread), takes its workspace's ``flock`` on its own file descriptor (so two
threads exclude each other as two processes do), and runs its git, agent and validation in child
processes with explicit working directories and environments; nothing in the pipeline changes the
process's working directory, environment or signal handlers. A thread per cycle rather than a pool:
the children of a cycle are made to die with the thread that started them (PR_SET_PDEATHSIG), which
lives exactly as long as its cycle; and a pool's size would cap ``--concurrency``.
`gep cycle` leaves ``IN_THREAD`` unset: its pipeline stays in the main thread, where Ctrl-C reaches it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")

IN_THREAD: contextvars.ContextVar[bool] = contextvars.ContextVar("gep_cycle_in_thread", default=False)


async def in_thread(fn: Callable[..., R], *args: object) -> R:
    """``fn(*args)`` in a new thread, with this context; its result (or exception) awaited here."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[R] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: R | None, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            outcome: tuple[R | None, BaseException | None] = (context.run(fn, *args), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    # daemon: a fleet interrupted with Ctrl-C does not wait for its cycles (the next cycle recovers each)
    threading.Thread(target=target, name=f"gep-{getattr(fn, '__name__', 'call')}", daemon=True).start()
    return await done
