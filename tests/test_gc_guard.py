"""The collector is paused for a compile and always restored."""
from __future__ import annotations

import gc

import pytest

from compiler.gcguard import collector_paused


def test_paused_inside_restored_after_even_on_error():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():  # nested: still paused, and the inner exit does not re-enable
                pass
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_transform_graph_leaves_the_collector_as_it_found_it():
    from pathlib import Path

    from compiler.api import transform_graph

    data = (Path(__file__).parent / "fixtures" / "tf1_fused_bn.pb").read_bytes()
    assert transform_graph(data, ["input"], ["output"], "fold_constants fold_batch_norms")
    assert gc.isenabled()
