"""time_interleaved (compiler/runtime/onnx_runner.py): every runner is timed equally often in each
position, so a model run right after another one is not always the same model."""
from __future__ import annotations

from compiler.runtime.onnx_runner import time_interleaved


class _Recorder:
    """A runner stand-in: records when it ran and reports its call number as the time."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def onnx_feeds(self, feeds):
        return feeds

    def time_once(self, feeds) -> float:
        self.log.append(self.name)
        return float(len(self.log))


def test_rounds_alternate_their_order():
    log: list[str] = []
    runners = [_Recorder("a", log), _Recorder("b", log), _Recorder("c", log)]
    times = time_interleaved(runners, {}, repeats=4, warmup=1)
    assert "".join(log) == "abc" + "abc" + "cba" + "abc" + "cba"
    assert [len(t) for t in times] == [4, 4, 4]
    firsts = [log[3 + 3 * k] for k in range(4)]
    assert firsts.count("a") == firsts.count("c") == 2
