"""A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), no torch needed.

The tracer replays its alloc/free stream through this model to turn "live bytes" into "reserved
bytes" (what `torch.cuda.max_memory_reserved` reports). The rules modelled, with the allocator's
constant names:
  * every request is rounded up to a multiple of 512 B (kMinBlockSize), at least 512 B;
  * requests <= 1 MiB (kSmallSize) use the small pool, larger ones the large pool;
  * a request no free block can hold gets a new segment: 2 MiB (kSmallBuffer) for the small pool,
    20 MiB (kLargeBuffer) for large requests below 10 MiB (kMinLargeAlloc), otherwise the request
    rounded up to 2 MiB (kRoundLarge);
  * a free block is chosen best-fit: the smallest free block that holds the request, lowest
    address among equals (the pool is a set ordered by (size, address));
  * the chosen block is split when the remainder is >= 512 B (small pool) or > 1 MiB (large pool);
    an unsplit remainder stays part of the allocated block and counts as allocated;
  * a freed block merges with free neighbours of the same segment;
  * segments are never returned (no `empty_cache`, no out-of-memory retry), so reserved only grows.
Not modelled: streams (one stream), `max_split_size_mb`, `roundup_power2_divisions`, expandable
segments, and the garbage-collection threshold; all are off by default.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
MIN_BLOCK_SIZE = 512  # kMinBlockSize
SMALL_SIZE = 1 * MIB  # kSmallSize: largest request served by the small pool
SMALL_BUFFER = 2 * MIB  # kSmallBuffer: segment size of the small pool
LARGE_BUFFER = 20 * MIB  # kLargeBuffer: segment size for large requests below MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
ROUND_LARGE = 2 * MIB  # kRoundLarge


def round_size(nbytes: int) -> int:
    """Bytes the allocator serves for a request: a multiple of 512, at least 512."""
    if nbytes < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    return -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


def segment_size(rounded: int) -> int:
    """Size of the segment (one cudaMalloc) opened for a request no cached block can serve."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-rounded // ROUND_LARGE) * ROUND_LARGE


def _should_split(remaining: int, small: bool) -> bool:
    # Large-pool remainders up to 1 MiB stay attached: splitting them would fragment big segments.
    return remaining >= MIN_BLOCK_SIZE if small else remaining > SMALL_SIZE


@dataclass(slots=True, eq=False)
class _Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None


def _order(entry: tuple) -> tuple[int, int]:
    return entry[0], entry[1]


class CachingAllocatorModel:
    """Replays malloc/free and tracks allocated and reserved bytes and their peaks.

    `malloc` returns a handle to pass to `free`. `allocated_bytes` counts whole blocks (including
    unsplit remainders), as the CUDA allocator's `allocated_bytes` statistic does.
    """

    def __init__(self) -> None:
        # Free blocks per pool, kept sorted by (size, address) like the allocator's std::set.
        self._free = {True: [], False: []}
        self._next_addr = 0
        self.reserved_bytes = 0
        self.allocated_bytes = 0
        self.peak_reserved_bytes = 0
        self.peak_allocated_bytes = 0
        self.num_segments = 0

    def malloc(self, nbytes: int) -> _Block:
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        block = self._take_free_block(size, small) or self._new_segment(size, small)
        if _should_split(block.size - size, small):
            self._split(block, size)
        block.free = False
        self.allocated_bytes += block.size
        self.peak_allocated_bytes = max(self.peak_allocated_bytes, self.allocated_bytes)
        return block

    def free(self, block: _Block) -> None:
        if block.free:
            raise ValueError("block freed twice")
        self.allocated_bytes -= block.size
        block.free = True
        # Merge with free neighbours of the same segment (prev/next never cross segments).
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._remove_free(neighbour)
                self._merge(block, neighbour)
        self._insert_free(block)

    # ---- internals ------------------------------------------------------------------------

    def _take_free_block(self, size: int, small: bool) -> _Block | None:
        pool = self._free[small]
        i = bisect.bisect_left(pool, (size, -1), key=_order)
        if i == len(pool):
            return None
        _, _, block = pool.pop(i)
        return block

    def _new_segment(self, size: int, small: bool) -> _Block:
        seg = segment_size(size)
        block = _Block(addr=self._next_addr, size=seg, small=small)
        self._next_addr += seg
        self.reserved_bytes += seg
        self.num_segments += 1
        self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.reserved_bytes)
        return block

    def _split(self, block: _Block, size: int) -> None:
        rest = _Block(addr=block.addr + size, size=block.size - size, small=block.small,
                      prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        self._insert_free(rest)

    def _merge(self, block: _Block, neighbour: _Block) -> None:
        if neighbour is block.prev:
            block.addr = neighbour.addr
            block.prev = neighbour.prev
            if block.prev is not None:
                block.prev.next = block
        else:
            block.next = neighbour.next
            if block.next is not None:
                block.next.prev = block
        block.size += neighbour.size

    def _insert_free(self, block: _Block) -> None:
        bisect.insort(self._free[block.small], (block.size, block.addr, block), key=_order)

    def _remove_free(self, block: _Block) -> None:
        pool = self._free[block.small]
        i = bisect.bisect_left(pool, (block.size, block.addr), key=_order)
        if i == len(pool) or pool[i][2] is not block:
            raise RuntimeError("allocator model invariant broken: free block missing from its pool")
        pool.pop(i)
