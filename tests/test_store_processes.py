"""Two sift processes sharing one store file never spend past a daily cap together."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from clockkit import DAY

from siftlib.store.factory import open_store

# One process: 8 threads reserve (and settle what they get) until told to stop.
WORKER = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from siftlib.store.factory import open_store

    path, go, cap = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    store = open_store(path)
    assert store.problem is None, store.problem
    granted = []
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)

    def race():
        mine = 0
        for _ in range(60):
            reservation = store.reserve("tavily", day="2025-11-30", cap=cap)
            if reservation is not None:
                time.sleep(0.001)  # the upstream call, so the two processes overlap
                store.settle(reservation, actual=1)
                mine += 1
        granted.append(mine)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sum(granted), store.problem)
    """
)


def test_two_processes_racing_reach_the_cap_exactly(tmp_path: Path) -> None:
    path, go, cap = tmp_path / "server.db", tmp_path / "go", 400
    open_store(path).close()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(go), str(cap)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    go.touch()
    outputs = [worker.communicate(timeout=120)[0].split() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert [problem for _, problem in outputs] == ["None", "None"]
    granted = [int(count) for count, _ in outputs]
    # 2 × 8 × 60 attempts for 400 credits: together exactly the cap, never one more.
    assert sum(granted) == cap, granted
    reopened = open_store(path)
    assert reopened.daily_credits(day=DAY) == {"tavily": cap}
    reopened.close()
