"""The project's Go build scripts (``tools/*/build.sh``), run from Python with their stderr said as
it comes: a first build takes minutes (the control plane about 10 on 2 cores), or waits for another
clone's build, and a capture that shows nothing until the end left ``make run`` silent for half an
hour (issue 43). The scripts say their steps, their progress and whose lock they wait for
(tools/build-common.sh); this passes those lines on."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NO_GO = 2  # the scripts' exit status when there is no Go toolchain


@dataclass(frozen=True)
class Build:
    """How a build script ended: its status, what it printed (the path built) and said."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def path(self) -> Path:
        """The last line of stdout: the scripts print what they built, or where."""
        return Path(self.stdout.strip().splitlines()[-1])


def run_build(script: Path, say: Callable[[str], None] | None = None, env: dict[str, str] | None = None) -> Build:
    """Run ``script`` (bash; ``env``: its environment, default this process's), each line of its
    stderr passed to ``say`` as it is written."""
    process = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    said = []
    for line in process.stderr:  # stdout is one line (a path): its pipe never fills meanwhile
        said.append(line)
        if say is not None:
            say(line.rstrip("\n"))
    stdout = process.stdout.read()
    return Build(process.wait(), stdout, "".join(said))


def build_tool(script: Path, what: str, unavailable: type[Exception],
               say: Callable[[str], None] | None = None) -> Build:
    """Run ``script`` for the tests and the demo: :class:`Build` when built (or cached);
    ``unavailable`` (a skip for the tests, a sentence for the demo) when there is no Go toolchain;
    RuntimeError with the build's output when the build failed, which is never a skip."""
    result = run_build(script, say)
    if result.returncode == NO_GO or (result.returncode and shutil.which("go") is None):
        raise unavailable(f"{what} is built from Go modules and needs the Go toolchain: install Go "
                          "(https://go.dev/doc/install or Debian's golang-go), then `make test-deps`")
    if result.returncode:
        raise RuntimeError(f"building {what} failed:\n{result.stderr[-4000:]}")
    return result
