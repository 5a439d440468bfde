"""The model thread's CPU threads: every core while other processes leave them alone, one fewer for each core they
keep busy (inference/cores.py), refitted at most once a window and without flapping between the two thresholds."""
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inference.cores import GIVE_SHARE, TAKE_SHARE, WINDOW_S, ThreadFit, fitted, read_cpu_times

load = st.floats(0.0, 20.0, allow_nan=False)


@given(st.integers(1, 16), st.integers(1, 16), load)
def test_a_fit_is_between_one_and_every_core(most, current, others):
    assert 1 <= fitted(most, min(current, most), others) <= most


@given(st.integers(1, 16), st.integers(1, 16), load, load)
def test_more_load_never_means_more_threads(most, current, a, b):
    current = min(current, most)
    low, high = sorted((a, b))
    assert fitted(most, current, high) <= fitted(most, current, low)


def test_the_two_thresholds():
    assert fitted(2, 2, 0.0) == 2 and fitted(2, 2, 0.05) == 2  # a bench's own client
    assert fitted(2, 2, TAKE_SHARE + 0.01) == 1 and fitted(2, 2, 1.0) == 1 and fitted(2, 2, 3.0) == 1
    between = (GIVE_SHARE + TAKE_SHARE) / 2
    assert fitted(2, 2, between) == 2 and fitted(2, 1, between) == 1  # neither taken nor given back: as it was
    assert fitted(2, 1, GIVE_SHARE - 0.01) == 2
    assert fitted(16, 16, 1.5) == 14 and fitted(16, 14, 1.0 + between) == 14 and fitted(16, 14, 1.0) == 15


class Machine:
    """A fake /proc/stat and clock: other processes' and this one's CPU seconds as the test spends them."""

    def __init__(self):
        self.now, self.busy, self.own = 0.0, 0.0, 0.0

    def read(self):
        return self.busy, self.own

    def clock(self):
        return self.now


class FitMachine(RuleBasedStateMachine):
    """Time passes with some load by others and by this process; the count changes only when a window has passed,
    and then to what fitted() says for the load over that window."""

    def __init__(self):
        super().__init__()
        self.machine = Machine()
        self.fit = ThreadFit(2, read=self.machine.read, clock=self.machine.clock)
        self.fit.threads_now()  # the first reading starts the first window
        self.window = (0.0, 0.0, 0.0)  # (time, busy seconds, own seconds) when the window began
        self.expected = 2

    @rule(seconds=st.floats(0.01, 1.5), others=st.floats(0.0, 2.0), own=st.floats(0.0, 2.0))
    def time_passes(self, seconds, others, own):
        self.machine.now += seconds
        self.machine.busy += (others + own) * seconds
        self.machine.own += own * seconds

    @rule()
    def a_call_comes(self):
        start, busy, own = self.window
        elapsed = self.machine.now - start
        threads = self.fit.threads_now()
        if elapsed >= WINDOW_S:  # others' use over the window: busy less this process's own
            others = ((self.machine.busy - busy) - (self.machine.own - own)) / elapsed
            self.expected = fitted(2, self.expected, others)
            self.window = (self.machine.now, self.machine.busy, self.machine.own)
        assert threads == self.expected

    @rule(others=st.sampled_from([0.0, 0.03, GIVE_SHARE - 0.01, GIVE_SHARE + 0.01, TAKE_SHARE - 0.01,
                                  TAKE_SHARE + 0.01, 0.5, 1.0, 1.9]), own=st.sampled_from([0.0, 1.0, 2.0]))
    def a_window_at_a_steady_load(self, others, own):
        """Loads near the thresholds, a window long (a window of random loads rarely averages to them)."""
        self.time_passes(WINDOW_S + 0.01, others, own)
        self.a_call_comes()

    @precondition(lambda self: self.machine.now - self.window[0] < WINDOW_S)
    @rule()
    def within_a_window_nothing_is_read(self):
        before = self.fit.threads
        assert self.fit.threads_now() == before

    @invariant()
    def within_bounds(self):
        assert 1 <= self.fit.threads <= 2


TestFitMachine = FitMachine.TestCase
TestFitMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_no_proc_stat_no_change():
    fit = ThreadFit(2, read=lambda: None, clock=iter(range(0, 100, 2)).__next__)
    assert [fit.threads_now() for _ in range(5)] == [2] * 5


def test_one_thread_is_never_refitted():
    calls = []
    fit = ThreadFit(1, read=lambda: calls.append(1) or (0.0, 0.0), clock=iter(range(100)).__next__)
    assert [fit.threads_now() for _ in range(4)] == [1] * 4 and not calls


def test_the_reader_adds_the_busy_fields_of_this_process_cpus_only(tmp_path):
    stat = tmp_path / "stat"
    hz = os.sysconf("SC_CLK_TCK")
    stat.write_text("cpu  999 999 999 999 999 999 999 999 0 0\n"  # every CPU: not read
                    "cpu0 100 10 20 5000 70 1 2 3 0 0\n"  # user nice system idle iowait irq softirq steal guest...
                    "cpu1 200 0 40 4000 30 0 0 0 0 0\n"
                    "cpu2 7 7 7 7 7 7 7 7 0 0\n"
                    "intr 12345 1 2 3\nctxt 999\n")
    busy, own = read_cpu_times({0, 1}, str(stat))
    assert busy == pytest.approx((100 + 10 + 20 + 1 + 2 + 3 + 200 + 40) / hz)  # idle and iowait are not busy
    assert own == pytest.approx(sum(os.times()[:2]), abs=0.05)
    assert read_cpu_times({0, 1}, str(tmp_path / "none")) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")
def test_the_reader_counts_this_process_as_its_own_and_a_child_as_others():
    """Whatever else the machine runs (other tests), a child's CPU shows in others' and ours only in our own."""
    busy0, own0 = read_cpu_times()
    child = subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                            "while time.process_time() - t < 0.4: pass\nprint(time.process_time() - t)"],
                           capture_output=True, text=True, check=True)
    busy1, own1 = read_cpu_times()
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass
    busy2, own2 = read_cpu_times()
    tick = 2 / os.sysconf("SC_CLK_TCK")  # /proc/stat counts whole ticks
    assert (busy1 - busy0) - (own1 - own0) >= float(child.stdout) - tick
    assert own2 - own1 >= 0.3 - tick and busy2 - busy1 >= 0.3 - tick
