"""Shared test fixtures: the committed model fixtures and the big generated ones."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
BIG_CACHE = Path(os.environ.get("GTTC_BIG_FIXTURES", ROOT / ".cache" / "bigfix"))
SMALL_MODELS = sorted(p.stem for p in FIXTURES.glob("*.pb"))
BIG_MODELS = ["keras_mobilenet_v2", "keras_resnet50", "keras_inception_v3",
              "keras_efficientnet_b0", "keras_densenet121"]

sys.path.insert(0, str(ROOT))

# pytester runs pytest inside a test (tests/testing/test_lit_runner.py checks the lit plugin that way).
pytest_plugins = ("pytester",)


def pytest_configure(config: pytest.Config) -> None:
    """Run lit files even where gttc's `pytest11` entry point is not installed (a checkout without `pip install -e`).

    Registered this late, the plugin's `--gttc-load-passes` flag is not parsed (its ini option still works);
    the project's own lit files need no plugin passes.
    """
    from compiler.testing import pytest_plugin

    manager = config.pluginmanager
    if not manager.has_plugin("gttc") and not manager.is_registered(pytest_plugin):
        manager.register(pytest_plugin, "gttc")


@pytest.fixture(autouse=True)
def _keeps_tensorflow_control_flow_v2():
    """Fail the test that leaves TF1 control flow switched on: the switch is process-wide, and every
    later test that builds a tf.cond would silently get Switch/Merge instead of If, depending on the
    random order the suite runs in (`tests.oracle.tf1_control_flow_graph` restores it)."""
    yield
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "compat") and not tf.compat.v1.control_flow_v2_enabled():
        tf.compat.v1.enable_control_flow_v2()  # so only the test that leaked it fails
        pytest.fail("this test left TF1 control flow switched on")


@dataclass
class Model:
    """A fixture on disk: GraphDef path, I/O names, reference feeds and TF's outputs."""

    name: str
    path: Path
    inputs: list[str]
    outputs: list[str]
    feeds: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @property
    def text_path(self) -> Path:
        return self.path.with_suffix(".pbtxt")


def load_model_fixture(name: str, folder: Path = FIXTURES) -> Model:
    meta = json.loads((folder / f"{name}.json").read_text())
    arrays = np.load(folder / f"{name}.npz")
    feeds = {k.split(":", 1)[1]: arrays[k] for k in arrays.files if k.startswith("input:")}
    expected = {k.split(":", 1)[1]: arrays[k] for k in arrays.files if k.startswith("output:")}
    return Model(name, folder / f"{name}.pb", list(meta["inputs"]), list(meta["outputs"]), feeds, expected)


def build_big_fixture(name: str) -> Model:
    """Build (once, cached on disk) a full-size Keras application; needs TensorFlow."""
    pytest.importorskip("tensorflow")
    if not (BIG_CACHE / f"{name}.json").exists():
        from tools import make_fixtures

        BIG_CACHE.mkdir(parents=True, exist_ok=True)
        make_fixtures.write(make_fixtures.build(name), name, BIG_CACHE)
    return load_model_fixture(name, BIG_CACHE)


@pytest.fixture(params=SMALL_MODELS)
def small_model(request) -> Model:
    return load_model_fixture(request.param)


@pytest.fixture(params=BIG_MODELS)
def big_model(request) -> Model:
    return build_big_fixture(request.param)


def calibration_for(model: Model, folder: Path, seed: int) -> str:
    """The fixture's own calibration set, or four seeded feeds spanning its feed's range, written to `folder`."""
    own = FIXTURES / f"{model.name}_calibration.npz"
    if own.exists():
        return str(own)
    rng = np.random.default_rng(seed)
    arrays = {name: rng.uniform(feed.min(), feed.max(), (4,) + feed.shape).astype(feed.dtype)
              for name, feed in model.feeds.items()}
    path = folder / f"{model.name}_calibration.npz"
    np.savez(path, **arrays)
    return str(path)
