"""GPU memory detection for a local start (nvidia-smi faked) and the resource it declares."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from cluster import GPU_MEMORY_RESOURCE, _inventory, detect_gpu_resources


def test_detect_sums_free_memory_of_all_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_inventory.shutil, "which", lambda _: "/usr/bin/nvidia-smi")

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert "--query-gpu=memory.free" in cmd
        return subprocess.CompletedProcess(cmd, 0, stdout="81000\n40960\n", stderr="")

    monkeypatch.setattr(_inventory.subprocess, "run", fake_run)
    assert detect_gpu_resources() == {GPU_MEMORY_RESOURCE: round((81000 + 40960) / 1024, 1)}


def test_detect_is_empty_without_nvidia_smi_or_on_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_inventory.shutil, "which", lambda _: None)
    assert detect_gpu_resources() == {}
    monkeypatch.setattr(_inventory.shutil, "which", lambda _: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        _inventory.subprocess,
        "run",
        lambda cmd, **_: subprocess.CompletedProcess(cmd, 9, stdout="", stderr="no devices"),
    )
    assert detect_gpu_resources() == {}
