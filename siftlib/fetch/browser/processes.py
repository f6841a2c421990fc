"""Which processes are the browser's: its process tree, and whether one holds a socket.

    if held_by_tree(peer_port, proxy_port, browser.pid): ...   # a connection from the browser
    for pid in tree(browser.pid): ...                          # the browser and its children

Linux only, read from `/proc`: a loopback socket's inode from `/proc/net/tcp`, each process's
open files from `/proc/PID/fd`, its children from `/proc/PID/task/TID/children` where the
kernel has that file, else from every process's parent in `/proc/PID/stat`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

__all__ = ["held_by_tree", "tree"]


def held_by_tree(peer_port: int, our_port: int, root: int) -> bool:
    """Tell whether the loopback socket `peer_port` → `our_port` belongs to `root`'s tree."""
    inode = _socket_inode(peer_port, our_port)
    if inode is None:
        return False
    wanted = f"socket:[{inode}]"
    for pid in tree(root):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                        return True
    return False


def _socket_inode(peer_port: int, our_port: int) -> str | None:
    local = f"0100007F:{peer_port:04X}"
    remote = f"0100007F:{our_port:04X}"
    with contextlib.suppress(OSError), open("/proc/net/tcp", encoding="ascii") as table:
        for line in table:
            fields = line.split()
            if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                return fields[9]
    return None


def tree(root: int) -> Iterator[int]:
    """Yield `root` and every descendant: from `/proc/PID/task/TID/children` where the kernel
    has it, else from every process's parent in `/proc/PID/stat`."""
    children = _children if os.path.exists(f"/proc/{root}/task/{root}/children") else _by_parent()
    seen: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        yield pid
        todo.extend(children(pid))


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                found.extend(int(child) for child in f.read().split())
    return found


def _by_parent() -> Callable[[int], list[int]]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                parents.setdefault(parent, []).append(int(entry))
    return lambda pid: parents.get(pid, [])
