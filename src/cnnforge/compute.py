"""Where tensors live (a CUDA GPU when present, else the CPU; ``--cpu``, ``--gpus``) and the
settings that keep GPU arithmetic exact, restored on leaving ``reproducible_math``."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.utils.deterministic  # the fill flag reproducible_math sets (torch >= 2.1)

from cnnforge.errors import InputError

CPU = torch.device("cpu")
#: cuBLAS picks its reduction order by workspace; this configuration makes it the same in every
#: run (what torch.use_deterministic_algorithms asks for on CUDA). Read when cuBLAS first runs.
CUBLAS_WORKSPACE = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
#: Data-loading worker processes at most (beyond this the GPU, not the data, sets the pace).
MAX_WORKERS = 16


def cuda_count() -> int:
    """CUDA devices this process can use (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def parse_gpus(gpus: str | Sequence[int] | None) -> tuple[int, ...] | None:
    """``"0,1"`` (or ``[0, 1]``) -> ``(0, 1)``; None stays None; InputError for anything else."""
    if gpus is None:
        return None
    text = gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus)
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise InputError(
            f"--gpus {text!r} is not a list of GPU indices", hint="e.g. --gpus 0 or --gpus 0,1"
        )
    return tuple(int(p) for p in parts)


def choose_device(
    *, cpu: bool = False, gpus: str | Sequence[int] | None = None, local_rank: int | None = None
) -> torch.device:
    """The device one process computes on: the CPU with ``cpu``, else GPU ``gpus[local_rank]`` (or
    ``cuda:local_rank``) when CUDA is present; a missing GPU is an InputError."""
    indices = parse_gpus(gpus)
    if cpu:
        if indices is not None:
            raise InputError("--cpu and --gpus exclude each other", hint="give one of them")
        return CPU
    available = cuda_count()
    rank = local_rank or 0
    if indices is None:
        if available == 0:
            return CPU
        if rank >= available:
            raise InputError(
                f"process {rank} on this machine has no GPU of its own: {available} CUDA "
                f"device(s) for its processes",
                hint="start one process per GPU, --gpus 0,0 to share one, or --cpu",
            )
        return torch.device("cuda", rank)
    missing = [i for i in indices if i >= available]
    if missing:
        raise InputError(
            f"--gpus {','.join(map(str, indices))}: there is no CUDA device {missing[0]} "
            f"({_cuda_state(available)})",
            hint="drop --gpus to use what is there, or --cpu" if available == 0 else
            f"give indices below {available} (nvidia-smi lists them), or --cpu",
        )  # fmt: skip
    if local_rank is None and len(indices) > 1:
        raise InputError(
            f"--gpus {','.join(map(str, indices))} names {len(indices)} GPUs, but one process "
            "trains on one",
            hint=f"start one process per GPU: torchrun --nproc_per_node {len(indices)} -m "
            "cnnforge train ...",
        )
    if rank >= len(indices):
        raise InputError(
            f"--gpus names {len(indices)} GPU(s), not one for process {rank} on this machine",
            hint="give one index per process (torchrun --nproc_per_node)",
        )
    return torch.device("cuda", indices[rank])


def _cuda_state(available: int) -> str:
    if available:
        return f"{available} CUDA device(s): 0..{available - 1}"
    if torch.version.cuda is None:
        return f"this torch {torch.__version__} is built without CUDA"
    return "no CUDA GPU is visible to this process"


def describe(device: torch.device) -> str:
    """``"cuda:0, NVIDIA H200"`` or ``"the CPU, 16 threads"`` (what the first line says)."""
    if device.type == "cuda":
        return f"{device}, {torch.cuda.get_device_name(device)}"
    return f"the CPU, {torch.get_num_threads()} threads"


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def default_workers(device: torch.device, processes: int = 1) -> int:
    """Data-loading worker processes: every core but one on a GPU (capped); on the CPU none below
    4 cores (measured, docs/training.md), else one per 8; ``processes`` share the machine."""
    cores = max(1, available_cores() // max(1, processes))
    if device.type == "cuda":
        return max(1, min(MAX_WORKERS, cores - 1))
    return 0 if cores < 4 else max(1, min(MAX_WORKERS, cores // 8))


def check_workers(workers: int) -> int:
    """``--workers`` as given, when it is a count (InputError for a negative one)."""
    if workers < 0:
        raise InputError(
            f"--workers {workers} is negative",
            hint="0 loads the data in the main process; N > 0 starts N processes",
        )
    return workers


@contextlib.contextmanager
def reproducible_math(device: torch.device, *, full_precision: bool = True) -> Iterator[None]:
    """Deterministic algorithms, and on CUDA deterministic cuDNN, cuBLAS's fixed workspace and
    (``full_precision``) TF32 off (docs/training.md); all restored on leaving."""
    saved = _read_settings()
    env_key, env_value = CUBLAS_WORKSPACE
    env_before = os.environ.get(env_key)
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        # not also NaN-filling every new tensor (a fill kernel per allocation: a fifth of a
        # small model's launches): no result reads memory before writing it
        torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
        if device.type == "cuda":
            os.environ.setdefault(env_key, env_value)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
            if full_precision:
                _set_tf32(False)
        yield
    finally:
        if env_before is None:
            os.environ.pop(env_key, None)
        _restore_settings(saved)


#: torch's newer per-backend float32 precisions (torch >= 2.9), kept as they were around a run.
_PRECISIONS = (("cuda", "matmul"), ("mkldnn", "matmul"), ("cudnn", "conv"), ("cudnn", "rnn"))


def _backend_flags(backend: str, op: str) -> Any:
    return getattr(getattr(torch.backends, backend), op, None)


def _read_settings() -> dict[str, Any]:
    settings: dict[str, Any] = {
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "fill": torch.utils.deterministic.fill_uninitialized_memory,  # type: ignore[attr-defined]
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "fp32_precision": {},
    }
    with contextlib.suppress(RuntimeError):  # torch refuses to read flags set by mixed APIs
        settings["tf32"] = (torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    for backend, op in _PRECISIONS:
        flags = _backend_flags(backend, op)
        with contextlib.suppress(AttributeError, RuntimeError):
            settings["fp32_precision"][backend, op] = flags.fp32_precision
    return settings


def _set_tf32(allowed: bool) -> None:
    """TF32 for cuBLAS and cuDNN on or off (the float32 matmul precision first: it sets the
    CPU's and the GPU's matmul precision together, so torch's flags stay consistent)."""
    with warnings.catch_warnings():  # newer torch suggests its newer names for the same flags
        warnings.simplefilter("ignore")
        torch.set_float32_matmul_precision("high" if allowed else "highest")
        torch.backends.cuda.matmul.allow_tf32 = allowed
        torch.backends.cudnn.allow_tf32 = allowed


def _restore_settings(saved: dict[str, Any]) -> None:
    torch.use_deterministic_algorithms(saved["deterministic"], warn_only=saved["warn_only"])
    torch.utils.deterministic.fill_uninitialized_memory = saved["fill"]  # type: ignore[attr-defined]
    torch.backends.cudnn.deterministic = saved["cudnn.deterministic"]
    torch.backends.cudnn.benchmark = saved["cudnn.benchmark"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "tf32" in saved:
            cudnn, precision = saved["tf32"]
            torch.backends.cudnn.allow_tf32 = cudnn
            torch.set_float32_matmul_precision(precision)
        for (backend, op), value in saved["fp32_precision"].items():
            _backend_flags(backend, op).fp32_precision = value


def float32_matmul_exact(device: torch.device) -> bool:
    """Whether float32 matrix products on ``device``'s CUDA backend are in full precision (no
    TF32); True on the CPU (sim.exact checks the CPU's own backends)."""
    if device.type != "cuda":
        return True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            allowed = torch.backends.cuda.matmul.allow_tf32
            precision = getattr(torch.backends.cuda.matmul, "fp32_precision", "none")
            highest = torch.get_float32_matmul_precision() == "highest"
    except RuntimeError:  # flags set through both of torch's APIs: cannot tell, assume not
        return False
    return not allowed and highest and precision in ("none", "ieee")


def nnpack_enabled() -> bool:
    """Whether PyTorch may send CPU convolutions to NNPACK (whose sums round), read from torch's
    private flag; a torch without it is taken as "enabled" (the safe answer)."""
    return bool(getattr(torch._C, "_get_nnpack_enabled", lambda: True)())


def check_on_device(condition: torch.Tensor, message: str) -> None:
    """Fail where the one-element ``condition`` is false, without reading it back: at once on
    the CPU (RuntimeError ``message``), at a later launch on a GPU (torch's device-side
    assertion, which ends the process's use of the GPU)."""
    torch._assert_async(condition, message)


def to_cpu(value: Any) -> Any:
    """``value`` with every tensor in it (dicts, lists, tuples) copied to the CPU: what a
    checkpoint stores, so that it loads anywhere. A GPU's tensors are all copied without
    waiting, then their devices waited for once (not once per tensor)."""
    devices: set[torch.device] = set()
    copied = _copied_to_cpu(value, devices)
    for device in devices:
        torch.cuda.synchronize(device)
    return copied


def _copied_to_cpu(value: Any, devices: set[torch.device]) -> Any:
    if isinstance(value, torch.Tensor):
        if value.device.type != "cuda":
            return value.detach().cpu()
        devices.add(value.device)
        return value.detach().to(CPU, non_blocking=True)  # into pinned memory
    if isinstance(value, dict):
        return {k: _copied_to_cpu(v, devices) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copied_to_cpu(v, devices) for v in value)
    return value
