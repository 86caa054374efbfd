"""The collector pause is the process's, shared by threads (a sync_watch process decodes pages of
several kinds at once, one thread each)."""

from __future__ import annotations

import gc
import threading

from config.gc_tuning import collector_paused


def test_the_collector_stays_paused_until_the_last_thread_is_done() -> None:
    first_inside, second_inside, first_done = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_inside.set()
            second_inside.wait(5)
        first_done.set()

    def second() -> None:
        first_inside.wait(5)
        with collector_paused():
            second_inside.set()
            first_done.wait(5)
            seen.append(gc.isenabled())  # the first thread has resumed... only if it was the last

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    assert gc.isenabled()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False] and gc.isenabled()


def test_a_collector_off_before_the_pause_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused(), collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
