"""A real redis-server for the shared-store tests, on a free loopback port, stopped by its pid.

Debian's `redis-server` package is the server (`make test` installs it when missing). Where it
is absent the tests skip with the reason, except under CI (`CI` set), where they fail: CI must
never skip them. Each server keeps no data on disk (`save ""`, no AOF) and refuses to evict.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
from gatewaykit import free_port

START_TIMEOUT = 10.0


def redis_server_binary() -> str:
    """Return the path of redis-server; skip the test (fail it under CI) when there is none."""
    found = shutil.which("redis-server")
    if found is None:
        reason = "redis-server is not installed (make test installs Debian's redis-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI never skips the shared-store tests")
        pytest.skip(reason)
    return found


class RedisServer:
    """One redis-server process: started on a free port, killed or stopped by pid, restartable."""

    def __init__(self, directory: Path, *, password: str | None = None) -> None:
        self.directory = directory
        self.password = password
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it answers PING."""
        for _ in range(3):
            self._spawn()
            if self._wait_ready():
                return
            self.port = free_port()  # taken by someone else meanwhile: try another
        raise RuntimeError(f"redis-server did not start; see {self.directory / 'redis.log'}")

    def _spawn(self) -> None:
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f'dir "{self.directory}"',
            f'logfile "{self.directory / "redis.log"}"',
            'save ""',
            "appendonly no",
            "maxmemory-policy noeviction",
        ]
        if self.password is not None:
            lines.append(f"requirepass {self.password}")
        # The config file, not the command line, carries the password: `ps` shows argv.
        config = self.directory / "redis.conf"
        config.write_text("\n".join(lines) + "\n")
        self.process = subprocess.Popen(
            [redis_server_binary(), str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with self.client() as client:
                    if client.ping():
                        return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.01)
        self.stop()
        return False

    def client(self) -> redis.Redis:
        """Return a plain client, for the tests to look at keys directly."""
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash or a pulled cable would."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections are accepted and commands queued, unread."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let a frozen server go on (SIGCONT): it runs the commands queued meanwhile."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def rotate_password(self, password: str) -> None:
        """Change the password and drop every client, as an operator rotating it would."""
        with self.client() as client:
            client.config_set("requirepass", password)
            client.client_kill_filter(_type="normal", skipme=True)
        self.password = password

    def stop(self) -> None:
        """Stop the server by its pid, at once: it keeps nothing, so SIGKILL loses nothing.

        SIGTERM would wait for the server's next cron tick (`hz 10`: ~0.1 s), on every test.
        """
        self.kill()
