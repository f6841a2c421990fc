"""The daily-cap counter on a Redis server: three Lua scripts over a counter, its record, marks.

    counter = RedisCounter(store)               # the ledger's Counter (`siftlib.store.ledger`)
    booked = counter.book(("tavily", "2026-11-30"), credits=1, cap=500, floor=Floor(0, ""),
                          ops=[], reserve="9f2c…", lease=2)

Each script touches one day's counter, its record (`RedisStore._cap_keys`) and a reserve's
mark, which share a Cluster hash slot, so they run unchanged on a Redis Cluster. They are
sent by EVALSHA, and by EVAL when the server answers NOSCRIPT. What they keep is in
`siftlib.store.redis`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import redis

from siftlib.config import SOURCE_ORDER
from siftlib.store.counter import Booked, Floor, Slot

if TYPE_CHECKING:
    from siftlib.store.redis import RedisStore

COUNTER_TTL = 48 * 3600
# How long a reserve's mark lives: a late reply's reserve and its withdrawal both run within
# seconds of the server answering again; the mark only has to outlive that.
MARK_TTL = 600

# KEYS[1] the day's counter, KEYS[2] its record, KEYS[3] (a reserve's) its mark; ARGV
# credits, cap, ttl, the caller's floor and its epoch, a new epoch, the mark's ttl, the lease
# wanted, then an id and a delta for each adjustment owed. A counter gone while the caller saw
# a total is re-created from that floor in the new epoch; a floor seen in an earlier epoch
# than the counter's raises it by what it knew more, once. Each owed id is applied once; then
# the credits are added only under the cap, and with them as much of the lease as fits. A
# reserve found marked ran already (its reply was late: it is answered as then, booked once)
# or was withdrawn ('w': refused); the mark holds all it booked.
_BOOK = """
local raw = redis.call('GET', KEYS[1])
local used = tonumber(raw or '0')
local floor = tonumber(ARGV[4])
local epoch = ''
if not raw then
  if floor > 0 then
    used = floor
    epoch = ARGV[6]
    redis.call('HSET', KEYS[2], 'floor', floor, 'epoch', epoch)
  end
elseif floor > 0 then
  local kept = redis.call('HMGET', KEYS[2], 'floor', 'epoch')
  if kept[2] then
    epoch = kept[2]
    if epoch ~= ARGV[5] and floor > tonumber(kept[1]) then
      used = used + floor - tonumber(kept[1])
      redis.call('HSET', KEYS[2], 'floor', floor)
    end
  end
end
for i = 9, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], 1) == 1 then
    used = used + tonumber(ARGV[i + 1])
  end
end
if epoch ~= '' or #ARGV > 8 then
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
used = math.max(used, 0)
local granted, leased = 0, 0
local credits, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local mark = KEYS[3] and redis.call('GET', KEYS[3])
if mark then
  if mark ~= 'w' then
    granted = 1
    leased = tonumber(mark) - credits
  end
elseif used + credits <= cap then
  leased = math.min(tonumber(ARGV[8]), cap - used - credits)
  used = used + credits + leased
  granted = 1
  if KEYS[3] then redis.call('SET', KEYS[3], credits + leased, 'EX', ARGV[7]) end
end
if not raw then
  redis.call('SET', KEYS[1], used, 'EX', ARGV[3])
elseif used ~= tonumber(raw) then
  redis.call('SET', KEYS[1], used, 'KEEPTTL')
end
return {granted, used, epoch, leased}
"""
# KEYS[1] the day's counter, KEYS[2] its record; ARGV id, delta, ttl. Nil when the counter is
# gone; the total unchanged when the id was applied already.
_ADJUST = """
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
if redis.call('HSETNX', KEYS[2], ARGV[1], 1) == 0 then return tonumber(raw) end
redis.call('EXPIRE', KEYS[2], ARGV[3])
local total = math.max(tonumber(raw) + tonumber(ARGV[2]), 0)
redis.call('SET', KEYS[1], total, 'KEEPTTL')
return total
"""
# KEYS[1] the day's counter, KEYS[2] a reserve's mark; ARGV the mark's ttl. A reserve that
# ran (its mark holds its credits) is taken back; one not run yet is refused when it does (its
# mark says 'w' from now on). Nil when the counter is gone; else the total.
_WITHDRAW = """
local mark = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], 'w', 'EX', ARGV[1])
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
if not mark or mark == 'w' then return tonumber(raw) end
local total = math.max(tonumber(raw) - tonumber(mark), 0)
redis.call('SET', KEYS[1], total, 'KEEPTTL')
return total
"""


class _Script:
    """A Lua script sent by its SHA1, and in full when the server does not know it."""

    def __init__(self, client: redis.Redis, source: str) -> None:
        self._client = client
        self._source = source
        self._sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, keys: tuple[str, ...], *args: int | str) -> object:
        try:
            return self._client.evalsha(self._sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            # EVAL runs it and caches it on the server, so the next EVALSHA finds it.
            return self._client.eval(self._source, len(keys), *keys, *args)


class RedisCounter:
    """The cap counters on the server as the ledger's counter (`siftlib.store.ledger.Counter`)."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._book = _Script(store._client, _BOOK)
        self._adjust = _Script(store._client, _ADJUST)
        self._withdraw = _Script(store._client, _WITHDRAW)

    def book(
        self,
        slot: Slot,
        *,
        credits: int,
        cap: int,
        floor: Floor,
        ops: Sequence[tuple[str, int]],
        reserve: str = "",
        lease: int = 0,
    ) -> Booked:
        """Run the booking script: the floor, owed ops once each, then credits and as much of
        the lease as fit under the cap (once per reserve id, which the script marks)."""
        store = self._store
        args: list[int | str] = [credits, cap, COUNTER_TTL, floor.total, floor.epoch]
        args.append(os.urandom(8).hex() if floor.total > 0 else "")  # the epoch if it re-creates
        args += [MARK_TTL, lease]
        for ident, delta in ops:
            args += [ident, delta]
        keys: tuple[str, ...] = store._cap_keys(slot)
        if reserve:
            keys += (self._mark(keys[0], reserve),)
        answer = store._call(lambda client: self._book(keys, *args))
        granted, total, epoch, leased = cast(list[int | bytes], answer)
        return Booked(bool(granted), int(total), cast(bytes, epoch).decode(), int(leased))

    def adjust(self, slot: Slot, op: tuple[str, int]) -> int | None:
        """Run the adjusting script: one op, once, on an existing counter."""
        store = self._store
        ident, delta = op
        total = store._call(
            lambda client: self._adjust(store._cap_keys(slot), ident, delta, COUNTER_TTL)
        )
        return None if total is None else int(cast(int, total))

    def withdraw(self, slot: Slot, reserve: str) -> int | None:
        """Run the withdrawing script: take a reserve back if it ran, refuse it if it runs."""
        store = self._store
        counter = store._cap_keys(slot)[0]
        keys = (counter, self._mark(counter, reserve))
        total = store._call(lambda client: self._withdraw(keys, MARK_TTL))
        return None if total is None else int(cast(int, total))

    def totals(self, day: str) -> dict[str, int]:
        """Read the day's counters of every source at once."""
        store = self._store
        keys = [store._cap_keys((name, day))[0] for name in SOURCE_ORDER]
        values = store._call(lambda client: client.mget(keys))
        return {
            name: int(value)
            for name, value in zip(SOURCE_ORDER, values, strict=True)
            if value is not None
        }

    def probe(self) -> None:
        """Return once the server answers."""
        self._store._call(lambda client: client.ping())

    @property
    def lasting(self) -> bool:
        """True once the store is closed."""
        return self._store._retry_at == float("inf")

    def _mark(self, counter: str, reserve: str) -> str:
        """A reserve's mark, in its counter's Cluster hash slot (as the record is)."""
        return f"{self._store.prefix}reserve:{{{counter}}}:{reserve}"
