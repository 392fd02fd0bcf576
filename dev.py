#!/usr/bin/env python3
"""Set up a virtual environment and run gttc's main job or its test suite.

    python3 dev.py demo    # install gttc, compile the bundled MobileNetV2 to GraphDef and ONNX, check the numbers,
                           # and compile a trained digits CNN to eight bits with calibrated ranges
    python3 dev.py test    # install gttc with TensorFlow (the oracle) and matplotlib, and run every test
    python3 dev.py example # (CI) install gttc and the example pass plugin into a fresh venv and use it there

Needs nothing but Python 3.10+; everything else is installed into .venv.
"""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
MODEL = "tests/fixtures/keras_mobilenet_v2_small.pb"
DEMO_OUTPUTS = ("build/mobilenet_v2_small.opt.pb", "build/mobilenet_v2_small.onnx")
TRAINED = "tests/fixtures/digits_cnn"  # a CNN trained on scikit-learn's digits, with calibration inputs


def run(*cmd: str) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)


def ensure_venv(extras: str) -> None:
    """Create .venv once and install gttc (editable) with the given extras."""
    if not (BIN / "python").exists():
        venv.create(VENV, with_pip=True)
    spec = f".[{extras}]" if extras else "."
    run(str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", spec)


def demo() -> None:
    ensure_venv("")
    (ROOT / "build").mkdir(exist_ok=True)
    run(str(BIN / "gttc"), "summarize", MODEL)
    outputs = [arg for out in DEMO_OUTPUTS for arg in ("-o", out)]
    run(str(BIN / "gttc"), "-O2", MODEL, *outputs, "--inputs=input", "--outputs=Identity", "--verify")
    run(str(BIN / "gttc"), "-O2", "--target=mobile-int8", f"{TRAINED}.pb", "-o", "build/digits_cnn.int8.pb",
        "-o", "build/digits_cnn.int8.onnx", f"--calibration={TRAINED}_calibration.npz", "--inputs=input",
        "--outputs=Identity,Identity_1", "--verify")


EXAMPLE = "examples/fold_pad_into_conv"
EXAMPLE_VENV = ROOT / "build" / "example-venv"


def example() -> None:
    """As a new user would: a fresh venv with only gttc and the example plugin, which loads with no flag."""
    import shutil

    shutil.rmtree(EXAMPLE_VENV, ignore_errors=True)
    venv.create(EXAMPLE_VENV, with_pip=True)
    bin_dir = EXAMPLE_VENV / ("Scripts" if os.name == "nt" else "bin")
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run(*pip, ".")
    run(*pip, f"./{EXAMPLE}[test]")
    listing = subprocess.run([str(bin_dir / "gttc"), "--list-passes"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    if "  fold_pad_into_conv\n" not in listing:
        raise SystemExit("the example's entry point did not register fold_pad_into_conv")
    print("gttc --list-passes shows fold_pad_into_conv (entry point, no flag)", flush=True)
    (ROOT / "build").mkdir(exist_ok=True)
    run(str(bin_dir / "gttc"), "-O2", "--transforms=fold_pad_into_conv", "tests/fixtures/keras_padded_convs.pb",
        "--outputs=Identity", "-o", "build/padded_convs.pb", "-o", "build/padded_convs.onnx", "--verify")
    run(str(bin_dir / "gttc"), "lit", f"{EXAMPLE}/tests")
    subprocess.run([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                   cwd=ROOT / EXAMPLE, check=True)


def test() -> None:
    ensure_venv("tf,test,dev,plot")
    run(str(BIN / "python"), "-m", "pytest", "-q", *sys.argv[2:])


def main() -> int:
    commands = {"demo": demo, "example": example, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        commands[sys.argv[1]]()
    except subprocess.CalledProcessError as err:
        return err.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
