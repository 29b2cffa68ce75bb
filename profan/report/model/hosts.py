"""The cross-host section of a report (JSON ``hosts`` and ``cross_host``): multi-host profiles
only, from ``profan.trace.hosts``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class HostEntry:
    """One host of a multi-host profile (JSON ``hosts[]``)."""

    #: the host's name
    host: str
    #: its device ids
    devices: list[int] = field(default_factory=list)
    #: first op to last op of each step on that host: the median
    step_time_median_s: float | None = None
    #: the same, 90th percentile
    step_time_p90_s: float | None = None
    #: one per step of `cross_host.steps`: how much later than the median host it started the
    #: step, on aligned clocks
    late_s: list[float | None] = field(default_factory=list)
    #: the median of `late_s`
    late_median_s: float | None = None
    #: the same as `late_s` at the step's first collective every host ran
    arrival_late_s: list[float | None] = field(default_factory=list)
    #: subtracted from its times to align it
    clock_offset_s: float | None = None
    #: idle time over its devices' spans
    idle_share: float | None = None
    #: late by more than 5% of the median step time and 100 us
    straggler: bool = False


@dataclass(slots=True)
class CrossHost:
    """Per-step skew and waiting across hosts, stragglers, clock alignment (JSON
    ``cross_host``)."""

    #: the steps every host ran
    steps: list[int] = field(default_factory=list)
    #: per step: latest minus earliest aligned step start
    skew_s: list[float | None] = field(default_factory=list)
    #: per step: time hosts spent in shared collectives beyond the fastest host
    wait_s: list[float | None] = field(default_factory=list)
    #: the largest `skew_s` (`profan check` budget: `[budget] max_host_skew_s`)
    max_skew_s: float | None = None
    #: the stragglers' host names
    stragglers: list[str] = field(default_factory=list)
    #: how clocks were aligned, in words: on the ends of collectives every host ran, which end at
    #: the same moment everywhere
    alignment: str = ""
    #: the collectives every host ran
    shared_collectives: list[str] = field(default_factory=list)
