"""The caching-allocator model against sequences worked by hand from the documented rules
(c10/cuda/CUDACachingAllocator.cpp: 512 B rounding, 1 MiB small/large threshold, 2 MiB small
segments, 20 MiB segments below 10 MiB, 2 MiB rounding above, best fit, split and merge rules)."""

import pytest

from frenzy.memory.trace.allocator import CachingAllocatorModel, round_size, segment_size

KIB, MIB = 1024, 1024 * 1024


def test_request_rounding():
    assert [round_size(n) for n in (1, 511, 512, 513, 1000)] == [512, 512, 512, 1024, 1024]


def test_segment_sizes():
    assert segment_size(512) == 2 * MIB  # small pool
    assert segment_size(MIB) == 2 * MIB  # 1 MiB is still small
    assert segment_size(MIB + 512) == 20 * MIB  # large, under 10 MiB
    assert segment_size(10 * MIB) == 10 * MIB  # >= 10 MiB: its own segment, rounded to 2 MiB
    assert segment_size(11 * MIB + 512) == 12 * MIB


def test_small_pool_reuses_freed_block_best_fit():
    a = CachingAllocatorModel()
    first = a.malloc(100)  # 512 B carved from a new 2 MiB segment
    second = a.malloc(1000)  # 1 KiB from the remainder
    assert (first.addr, second.addr) == (0, 512)
    a.free(first)
    third = a.malloc(512)  # best fit: the 512 B hole, not the big remainder
    assert third.addr == 0
    assert a.reserved_bytes == 2 * MIB and a.num_segments == 1
    assert a.allocated_bytes == 1536


def test_large_pool_split_threshold_and_oversize_segment():
    a = CachingAllocatorModel()
    b3 = a.malloc(3 * MIB)  # new 20 MiB segment; 17 MiB remainder > 1 MiB is split off
    b16 = a.malloc(16 * MIB)  # from the 17 MiB block; the 1 MiB remainder stays attached
    assert b16.size == 17 * MIB
    assert a.allocated_bytes == 20 * MIB and a.reserved_bytes == 20 * MIB
    a.malloc(12 * MIB)  # nothing free: a 12 MiB segment of its own
    assert a.reserved_bytes == 32 * MIB
    a.free(b3)
    a.free(b16)  # merges with the freed 3 MiB block: one 20 MiB free block
    b19 = a.malloc(19 * MIB)
    assert b19.addr == 0 and b19.size == 20 * MIB
    assert a.reserved_bytes == 32 * MIB and a.peak_reserved_bytes == 32 * MIB


def test_fragmentation_forces_new_segment():
    a = CachingAllocatorModel()
    x = a.malloc(6 * MIB)  # 20 MiB segment: [x 6][y 6][free 8]
    a.malloc(6 * MIB)
    a.free(x)  # free: 6 MiB at 0, 8 MiB at 12 MiB
    seven = a.malloc(7 * MIB)  # best fit is the 8 MiB block (remainder 1 MiB not split)
    assert seven.addr == 12 * MIB and seven.size == 8 * MIB
    six = a.malloc(6 * MIB)  # exactly the 6 MiB hole
    assert six.addr == 0
    assert a.reserved_bytes == 20 * MIB
    a.malloc(5 * MIB)  # 20 MiB segment is full: another one
    assert a.reserved_bytes == 40 * MIB and a.num_segments == 2


def test_free_merges_both_neighbours():
    a = CachingAllocatorModel()
    blocks = [a.malloc(2 * MIB) for _ in range(3)]  # [2][2][2][free 14]
    a.free(blocks[0])
    a.free(blocks[2])  # merges with the 14 MiB tail
    a.free(blocks[1])  # merges with both sides: the whole segment is one free block
    whole = a.malloc(20 * MIB)
    assert whole.addr == 0 and whole.size == 20 * MIB
    assert a.reserved_bytes == 20 * MIB


def test_pools_do_not_share_segments():
    a = CachingAllocatorModel()
    big = a.malloc(4 * MIB)
    a.free(big)  # a free 20 MiB large block
    a.malloc(KIB)  # small requests never use the large pool
    assert a.reserved_bytes == 22 * MIB


def test_double_free_is_an_error():
    a = CachingAllocatorModel()
    block = a.malloc(KIB)
    a.free(block)
    with pytest.raises(ValueError):
        a.free(block)
