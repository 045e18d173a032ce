"""Shared pytest fixtures: where the deepinfer binary is (DEEPINFER_BIN, default build/deepinfer)
and the project root."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def deepinfer_bin():
    path = pathlib.Path(os.environ.get("DEEPINFER_BIN", ROOT / "build" / "deepinfer"))
    if not path.is_absolute():
        path = ROOT / path
    assert path.exists(), f"{path} is missing: build first (cmake --build build)"
    return str(path)
