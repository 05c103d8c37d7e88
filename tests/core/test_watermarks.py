"""The low watermark that closes windows (driftline.watermarks): partitions, idleness, stalled readers, groups."""
from __future__ import annotations

from driftline.watermarks import PartitionMark, low_watermark, window_closed

IDLE = 30_000
NOW = 10_000_000


def mark(partition: int, event_time: int | None, idle_since: int | None = None, updated: int = NOW,
         group: str = "g") -> PartitionMark:
    return PartitionMark("t", partition, event_time, idle_since, updated, group)


def test_the_slowest_partition_holds_the_watermark():
    assert low_watermark([mark(0, 9_000_000), mark(1, 8_000_000), mark(2, 9_500_000)], NOW, IDLE) == 8_000_000


def test_a_partition_with_nothing_stored_yet_holds_every_window_back():
    assert low_watermark([mark(0, 9_000_000), mark(1, None)], NOW, IDLE) is None
    assert not window_closed(0, None, 0)


def test_an_idle_partition_counts_as_the_wall_clock_once_idle_long_enough():
    quiet = mark(1, 1_000, idle_since=NOW - IDLE)
    assert low_watermark([mark(0, 9_000_000), quiet], NOW, IDLE) == 9_000_000
    almost = mark(1, 1_000, idle_since=NOW - IDLE + 1)  # not yet
    assert low_watermark([mark(0, 9_000_000), almost], NOW, IDLE) == 1_000
    # every partition idle (every model stopped sending): the wall clock closes the last windows
    assert low_watermark([mark(0, 9_000_000, idle_since=0), mark(1, None, idle_since=0)], NOW, IDLE) == NOW


def test_a_reader_that_went_quiet_holds_its_partition_instead_of_counting_as_idle():
    stalled = mark(1, 5_000_000, idle_since=0, updated=NOW - IDLE)  # its collector was killed long ago
    assert low_watermark([mark(0, 9_000_000), stalled], NOW, IDLE) == 5_000_000


def test_the_furthest_group_counts_for_a_partition_and_no_rows_mean_the_wall_clock():
    old_group = mark(0, 1_000, updated=0, group="old")
    assert low_watermark([old_group, mark(0, 7_000_000), mark(1, 8_000_000)], NOW, IDLE) == 7_000_000
    assert low_watermark([], NOW, IDLE) == NOW


def test_a_window_is_closed_when_the_watermark_less_the_lateness_has_passed_its_end():
    assert window_closed(60_000, 90_000, 30_000)
    assert not window_closed(60_000, 89_999, 30_000)
