"""The worker pool: each way a call ends, on real worker processes.

Test code runs in a worker as `eval` of its bytes: a stdlib function is picklable by name,
where a function defined here would need this test module importable in the worker.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewaykit import wait_until

from siftlib.fetch.workers import WorkCancelled, WorkerPool, WorkFailed, WorkTimeout

PID = b"__import__('os').getpid()"


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(1) as pool:
        yield pool


def soon(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_call_returns_what_the_function_returns(pool: WorkerPool) -> None:
    assert pool.run(len, b"x" * 100_000, deadline=soon()) == 100_000
    pid = pool.run(eval, PID, deadline=soon())
    assert pid != os.getpid()
    assert pool.run(eval, PID, deadline=soon()) == pid  # the worker is kept between calls


def test_arguments_follow_the_bytes(pool: WorkerPool) -> None:
    assert pool.run(bytes.split, b"a,b,c", b",", deadline=soon()) == [b"a", b"b", b"c"]


def test_the_functions_own_exception_is_raised_again(pool: WorkerPool) -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        pool.run(int, b"not a number", deadline=soon())
    assert pool.run(len, b"abc", deadline=soon()) == 3


def test_at_the_deadline_the_worker_is_killed_and_replaced(pool: WorkerPool) -> None:
    pid = pool.run(eval, PID, deadline=soon())
    with pytest.raises(WorkTimeout):
        pool.run(eval, b"__import__('time').sleep(60)", deadline=time.monotonic() + 0.3)
    assert not alive(pid)
    fresh = pool.run(eval, PID, deadline=soon())
    assert fresh != pid


def test_a_cancelled_call_stops_its_worker(pool: WorkerPool) -> None:
    pid = pool.run(eval, PID, deadline=soon())
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(WorkCancelled):
        pool.run(eval, b"__import__('time').sleep(60)", deadline=soon(), cancel=cancel)
    assert not alive(pid)
    assert pool.run(len, b"ab", deadline=soon()) == 2


def test_a_call_past_its_memory_limit_fails_and_the_worker_is_replaced(pool: WorkerPool) -> None:
    pid = pool.run(eval, PID, deadline=soon())
    with pytest.raises(WorkFailed) as failed:
        # 64 MB of address space: four times a bare worker's (~16 MB), far below the 2 GB.
        pool.run(eval, b"bytearray(2 << 30)", deadline=soon(), memory=64 << 20)
    assert failed.value.kind == "memory"
    assert pool.run(eval, PID, deadline=soon()) != pid
    # The limit holds for that call only: the next one may use more than it.
    assert pool.run(eval, b"len(bytearray(96 << 20))", deadline=soon()) == 96 << 20


def test_a_worker_that_dies_is_a_failure_and_is_replaced(pool: WorkerPool) -> None:
    with pytest.raises(WorkFailed) as failed:
        pool.run(eval, b"__import__('os')._exit(3)", deadline=soon())
    assert failed.value.kind == "crashed"
    assert pool.run(len, b"abcd", deadline=soon()) == 4


def test_waiting_for_a_free_worker_counts_against_the_deadline(
    pool: WorkerPool, tmp_path: Path
) -> None:
    running = tmp_path / "running"
    # The only worker marks that it runs the call, then holds it for a second.
    hold = f"(open({str(running)!r}, 'w').close(), __import__('time').sleep(1.0))".encode()
    busy = threading.Thread(target=lambda: pool.run(eval, hold, deadline=soon()))
    busy.start()
    wait_until(running.exists, "the busy call running")
    with pytest.raises(WorkTimeout, match="no worker was free"):
        pool.run(len, b"x", deadline=time.monotonic() + 0.2)
    busy.join()
    assert pool.run(len, b"x", deadline=soon()) == 1


def test_close_stops_the_workers() -> None:
    pool = WorkerPool(2)
    pool.start()
    pids = [pool.run(eval, PID, deadline=soon()) for _ in range(2)]
    pool.close()
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(WorkFailed, match="closed"):
        pool.run(len, b"x", deadline=soon())


def test_no_worker_starts_before_the_first_call() -> None:
    pool = WorkerPool(2)
    assert pool._started == 0 and pool._idle == []
    pool.close()  # a pool that never started closes as a no-op
    pool.close()
    assert pool._started == 0
    with pytest.raises(WorkFailed, match="closed"):
        pool.run(len, b"x", deadline=soon())
    pool.start()
    assert pool._started == 0  # closed: start() starts nothing


def test_calls_racing_the_first_start_stay_within_the_pool_size() -> None:
    with WorkerPool(1) as pool:
        go = threading.Barrier(9)
        pids: list[int] = []

        def first_call() -> None:
            go.wait()
            pids.append(pool.run(eval, PID, deadline=soon()))

        def first_start() -> None:
            go.wait()
            pool.start()

        threads = [threading.Thread(target=first_call) for _ in range(8)]
        threads.append(threading.Thread(target=first_start))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(pids) == 8 and len(set(pids)) == 1  # one worker served them all
