"""The collector pause is the process's, shared by threads (a sync_watch process decodes pages of
several kinds at once, one thread each); one-request-at-a-time web workers collect between requests."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from common.gc_tuning import CollectedBetweenRequests, collector_paused


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


class _Answer:
    """A WSGI answer as Django's handler returns one: ``streaming`` says whether it is read as it goes."""

    def __init__(self, streaming: bool) -> None:
        self.streaming, self.closed = streaming, False

    def __iter__(self):
        return iter([b"body"])

    def close(self) -> None:
        self.closed = True


def _app(seen: list[bool], answer: _Answer | None = None, error: Exception | None = None):
    def application(environ, start_response):
        seen.append(gc.isenabled())
        if error is not None:
            raise error
        start_response("200 OK", [])
        return answer

    return application


def _environ(multithread: bool) -> dict:
    return {"wsgi.multithread": multithread}


def test_one_request_at_a_time_the_collector_waits_while_it_is_answered() -> None:
    seen: list[bool] = []
    answer = _Answer(streaming=False)
    released = weakref.ref(answer)
    body = CollectedBetweenRequests(_app(seen, answer))(_environ(False), lambda *args: None)
    assert seen == [False] and answer.closed  # taken and closed before it is handed to the server
    del answer
    assert body == [b"body"] and released() is None and gc.isenabled()


def test_a_streamed_answer_or_a_failed_request_resumes_it_at_once() -> None:
    seen: list[bool] = []
    streamed = _Answer(streaming=True)
    assert CollectedBetweenRequests(_app(seen, streamed))(_environ(False), lambda *args: None) is streamed
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        CollectedBetweenRequests(_app(seen, error=RuntimeError("view failed")))(_environ(False), lambda *args: None)
    assert seen == [False, False] and gc.isenabled()
    not_django = object()  # a file wrapper, or any answer that does not say it is whole
    assert CollectedBetweenRequests(_app(seen, not_django))(_environ(False), lambda *args: None) is not_django
    assert gc.isenabled()


def test_threaded_servers_and_a_collector_already_off_are_left_alone() -> None:
    seen: list[bool] = []
    answer = _Answer(streaming=False)
    assert CollectedBetweenRequests(_app(seen, answer))(_environ(True), lambda *args: None) is answer
    assert CollectedBetweenRequests(_app(seen, answer))({}, lambda *args: None) is answer  # unknown: maybe threaded
    gc.disable()
    try:
        assert CollectedBetweenRequests(_app(seen, answer))(_environ(False), lambda *args: None) is answer
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert seen == [True, True, False]


def test_the_deploys_application_is_wrapped() -> None:
    from config.wsgi import application

    assert isinstance(application, CollectedBetweenRequests)
