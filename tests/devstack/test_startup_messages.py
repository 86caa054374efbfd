"""The first start says what it is doing (issue 43: 29 minutes to the first page, 26 of them waiting
on another build's lock with nothing said; a warm start died with "the gateway did not start within
60 s" and a traceback at load 11-16). The real build scripts and real processes."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from django.conf import settings

from devstack import live_demo
from devstack.control_plane import SAY_EVERY_SECONDS
from devstack.go_tools import run_build
from devstack.live_demo import Endpoints, LiveDemo
from devstack.ports import free_port
from tests.clusters.conftest import wait_for

TOOLS = Path(settings.BASE_DIR) / "tools"


class Holder:
    """A bash process that took a cache folder's build lock as the build scripts take it, and holds
    it until told to go on."""

    def __init__(self, folder: Path) -> None:
        self.process = subprocess.Popen(
            ["bash", "-c", f'source {TOOLS / "build-common.sh"}; take_build_lock "$1" "the thing"; echo held; read',
             "holder", str(folder)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.process.stdout.readline() == "held\n"

    def release(self) -> None:
        self.process.communicate("\n", timeout=30)


def test_a_build_waiting_on_another_builds_lock_says_whose_and_goes_on(tmp_path: Path) -> None:
    holder = Holder(tmp_path)
    said: list[str] = []
    script = tmp_path / "build.sh"
    common = TOOLS / "build-common.sh"
    script.write_text(f'source {common}; take_build_lock "{tmp_path}" "the thing"; echo {tmp_path}\n')
    built = []
    waiter = threading.Thread(target=lambda: built.append(run_build(script, said.append)))
    waiter.start()
    # said while the build still waits (passed on as written, not when the script ends)
    wait_for(lambda: any(line.startswith("waiting for another build of the thing to finish") for line in said),
             timeout=30, message="the waiting build to say so")
    assert waiter.is_alive()
    line = next(line for line in said if line.startswith("waiting"))
    assert f"pid {holder.process.pid} (" in line and str(tmp_path / ".build.lock") in line
    holder.release()
    waiter.join(timeout=30)
    assert built[0].returncode == 0 and built[0].path == tmp_path
    assert said[-1].startswith("the other build of the thing finished after")


def test_a_cached_tool_builds_silently_and_a_new_one_says_so(tmp_path: Path) -> None:
    """Nothing said on a warm start: "about 10 minutes" was printed on every start."""
    if subprocess.run(["bash", "-c", "command -v go"], capture_output=True).returncode:
        pytest.skip("no Go toolchain to build with")
    env = {**os.environ, "OIDC_PROVIDER_CACHE": str(tmp_path)}
    first = subprocess.run(["bash", str(TOOLS / "oidc-provider" / "build.sh")], capture_output=True, text=True,
                           env=env, timeout=1800)
    assert first.returncode == 0, first.stderr
    assert "building oidc-provider into" in first.stderr and "oidc-provider: built in" in first.stderr
    again = subprocess.run(["bash", str(TOOLS / "oidc-provider" / "build.sh")], capture_output=True, text=True,
                           env=env, timeout=300)
    assert again.returncode == 0 and again.stderr == "" and again.stdout == first.stdout


@pytest.fixture
def demo(tmp_path: Path, monkeypatch) -> LiveDemo:
    """A live demo's starter, without its control plane: only its waits are exercised here."""
    monkeypatch.setattr(live_demo, "SAY_EVERY_SECONDS", 0.0)  # say at every poll: the test waits for the line
    out = io.StringIO()
    made = LiveDemo(Endpoints("127.0.0.1", free_port(), free_port()), tmp_path, out)
    yield made
    made.shutdown()


def test_a_slow_part_is_waited_for_with_a_message_not_a_deadline(demo: LiveDemo) -> None:
    demo._start("slow", ["shell", "-c", "import time; time.sleep(3600)"])
    ready = threading.Event()
    waiting = threading.Thread(target=demo._wait, args=(ready.is_set, "the slow part"))
    waiting.start()
    wait_for(lambda: "still waiting for the slow part" in demo.out.getvalue(), timeout=60,
             message="the wait to say what it waits for")
    ready.set()
    waiting.join(timeout=30)
    assert not waiting.is_alive()
    assert SAY_EVERY_SECONDS > 0  # the real interval: quiet while a part comes up quickly


def test_a_part_that_exits_ends_the_start_with_its_output_and_no_traceback(demo: LiveDemo) -> None:
    demo._start("broken", ["shell", "-c", "import sys; print('cannot bind the port'); sys.exit(3)"])
    with pytest.raises(RuntimeError) as failed:
        demo._wait(lambda: False, "the gateway")
    assert str(failed.value).startswith("broken exited while waiting for the gateway; its last output:\n")
    assert "cannot bind the port" in str(failed.value)


def test_run_demo_says_a_failed_start_in_a_sentence(tmp_path: Path) -> None:
    """``LiveDemo.run`` turns a part that could not start into a sentence and exit status 1."""
    out = io.StringIO()
    demo = LiveDemo(Endpoints("127.0.0.1", free_port(), free_port()), tmp_path / "no-binaries", out)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # run() sets its own
    try:
        assert demo.run() == 1
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert "The live demo could not start:" in out.getvalue() and "Traceback" not in out.getvalue()
