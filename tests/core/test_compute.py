"""Where the work runs (cnnforge.compute): CUDA when present, ``--cpu``, ``--gpus``, worker
counts, and the exact-arithmetic settings restored after use; CUDA's presence simulated."""

from __future__ import annotations

import os

import pytest
import torch

from cnnforge import compute
from cnnforge.compute import (
    CUBLAS_WORKSPACE,
    choose_device,
    default_workers,
    describe,
    float32_matmul_exact,
    parse_gpus,
    reproducible_math,
    to_cpu,
)
from cnnforge.errors import InputError
from cnnforge.training.distributed import backend_for

CUDA0, CUDA1 = torch.device("cuda", 0), torch.device("cuda", 1)


@pytest.fixture
def gpus(monkeypatch):
    """Pretend this process sees ``n`` CUDA devices (0: none)."""

    def see(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)

    return see


def test_without_cuda_everything_runs_on_the_cpu(gpus) -> None:
    gpus(0)
    assert choose_device() == compute.CPU
    assert choose_device(cpu=True) == compute.CPU
    assert describe(compute.CPU) == f"the CPU, {torch.get_num_threads()} threads"


@pytest.mark.parametrize("given", ["0", "7", "0,1", [2]])
def test_any_gpu_index_without_cuda_is_one_error(gpus, given) -> None:
    gpus(0)
    with pytest.raises(InputError, match="there is no CUDA device") as info:
        choose_device(gpus=given)
    assert "\n" not in str(info.value) and "hint:" in str(info.value)


def test_with_cuda_the_gpu_is_the_default_and_gpus_picks(gpus) -> None:
    gpus(2)
    assert choose_device() == CUDA0
    assert choose_device(cpu=True) == compute.CPU
    assert choose_device(gpus="1") == CUDA1
    assert choose_device(gpus=[1]) == CUDA1
    # under torchrun: each process its own GPU, by its local rank
    assert choose_device(local_rank=1) == CUDA1
    assert choose_device(gpus="1,0", local_rank=1) == CUDA0
    assert choose_device(gpus="0,0", local_rank=1) == CUDA0  # two processes share one GPU


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gpus": "2"}, r"no CUDA device 2 \(2 CUDA device\(s\): 0..1\)"),
        ({"gpus": "0,1"}, "names 2 GPUs, but one process trains on one"),
        ({"gpus": "0,1", "local_rank": 2}, "not one for process 2"),
        ({"local_rank": 2}, "process 2 on this machine has no GPU of its own"),
        ({"cpu": True, "gpus": "0"}, "--cpu and --gpus exclude each other"),
        ({"gpus": "a"}, "not a list of GPU indices"),
        ({"gpus": "0,,1"}, "not a list of GPU indices"),
        ({"gpus": "-1"}, "not a list of GPU indices"),
    ],
)
def test_bad_gpu_choices_are_one_line_errors(gpus, kwargs, match) -> None:
    gpus(2)
    with pytest.raises(InputError, match=match):
        choose_device(**kwargs)


def test_parse_gpus() -> None:
    assert parse_gpus(None) is None
    assert parse_gpus("0, 1") == (0, 1)
    assert parse_gpus((3,)) == (3,)


def test_default_workers_follow_the_cores(monkeypatch) -> None:
    for cores, gpu, cpu in ((16, 15, 2), (64, compute.MAX_WORKERS, 8), (2, 1, 0), (1, 1, 0),
                            (4, 3, 1)):  # fmt: skip
        monkeypatch.setattr(compute, "available_cores", lambda cores=cores: cores)
        assert default_workers(CUDA0) == gpu, cores
        assert default_workers(compute.CPU) == cpu, cores
    monkeypatch.setattr(compute, "available_cores", lambda: 16)
    assert default_workers(CUDA0, processes=2) == 7  # torchrun: the cores shared by 2 ranks


def test_check_workers() -> None:
    assert compute.check_workers(0) == 0
    with pytest.raises(InputError, match="--workers -1 is negative"):
        compute.check_workers(-1)


def _settings() -> tuple:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
        os.environ.get(CUBLAS_WORKSPACE[0]),
        torch.utils.deterministic.fill_uninitialized_memory,
    )


@pytest.mark.parametrize("device", [compute.CPU, CUDA0])
def test_reproducible_math_sets_and_restores(monkeypatch, device) -> None:
    """The CUDA settings are flags torch keeps on a CPU build too: set inside, restored after
    (a caller's TF32 and benchmark choices survive the block)."""
    monkeypatch.delenv(CUBLAS_WORKSPACE[0], raising=False)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        before = _settings()
        with reproducible_math(device):
            assert torch.are_deterministic_algorithms_enabled()
            # no NaN fill of every new tensor: a kernel per allocation, no result depends on it
            assert not torch.utils.deterministic.fill_uninitialized_memory
            if device.type == "cuda":
                assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
                assert not torch.backends.cuda.matmul.allow_tf32
                assert not torch.backends.cudnn.allow_tf32
                assert os.environ[CUBLAS_WORKSPACE[0]] == CUBLAS_WORKSPACE[1]
                assert float32_matmul_exact(device)
        assert _settings() == before
    finally:
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")


def test_a_medium_matmul_precision_is_restored() -> None:
    torch.set_float32_matmul_precision("medium")
    try:
        with reproducible_math(CUDA0):
            assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = False


def test_float32_float_phase_keeps_tf32_as_it_was() -> None:
    """Float epochs (full_precision=False) leave TF32 to the caller: not exact then."""
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with reproducible_math(CUDA0, full_precision=False):
            assert torch.backends.cuda.matmul.allow_tf32
            assert not float32_matmul_exact(CUDA0)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    assert float32_matmul_exact(CUDA0) and float32_matmul_exact(compute.CPU)


def test_to_cpu_copies_nested_tensors() -> None:
    value = {"a": torch.ones(2), "b": [torch.zeros(1), (torch.ones(1), 3)], "c": "x"}
    out = to_cpu(value)
    assert out["b"][1][1] == 3 and out["c"] == "x" and isinstance(out["b"][1], tuple)
    assert all(t.device.type == "cpu" for t in (out["a"], out["b"][0], out["b"][1][0]))


def test_distributed_backend() -> None:
    assert backend_for(compute.CPU, None) == "gloo"
    assert backend_for(CUDA0, None) == "nccl"
    assert backend_for(CUDA0, (0, 1)) == "nccl"
    assert backend_for(CUDA0, (0, 0)) == "gloo"  # ranks sharing a GPU: NCCL cannot
