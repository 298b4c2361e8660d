"""Import a vendor network YAML + quantized checkpoint as a hardware ``Network`` and its ``Plan``;
every inconsistency is a ``ConfigError`` at the YAML's file:line (docs/ai8x-format.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cnnforge.errors import ConfigError
from cnnforge.geometry import layer_in_channels, passes, processors_per_pass
from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.resources import check_input_shape
from cnnforge.targets.max7800x.ai8x_checkpoint import (
    CheckpointData,
    CheckpointLayer,
    read_checkpoint,
)
from cnnforge.targets.max7800x.ai8x_layers import LayerContext, build_layer
from cnnforge.targets.max7800x.ai8x_rules import check_streaming, duplicate_copy
from cnnforge.targets.max7800x.ai8x_yaml import YamlConfig, YamlLayer, read_yaml_config
from cnnforge.targets.max7800x.device import Max7800xDevice, get_device
from cnnforge.targets.max7800x.placement import Placement, Plan

if TYPE_CHECKING:
    from cnnforge.pipeline.sources import ModelSource


@dataclass(frozen=True)
class Ai8xModel:
    """An imported vendor pair: the network, its placement and the file-level metadata."""

    network: Network
    plan: Plan
    arch: str
    dataset: str
    epoch: int | None = None
    modules: tuple[tuple[str, str], ...] = ()  # (layer name, checkpoint module path)
    extras: dict[str, Any] = field(default_factory=dict)


def load_ai8x(
    yaml_path: Path | str,
    checkpoint_path: Path | str,
    input_shape: tuple[int, ...] | None = None,
    *,
    device: str | Max7800xDevice,
    **options: Any,
) -> tuple[Network, Plan]:
    """The vendor pair as ``(Network, Plan)``; options as for ``read_ai8x``."""
    model = read_ai8x(yaml_path, checkpoint_path, input_shape, device=device, **options)
    return model.network, model.plan


def pair_network(
    source: ModelSource, input_shape: tuple[int, ...] | None, device: Max7800xDevice
) -> Network:
    """The network of a vendor-pair source (its ``Target.read_pair``; the plan is not needed)."""
    return load_ai8x(source.ai8x_yaml, source.ai8x_checkpoint, input_shape, device=device)[0]


def read_ai8x(
    yaml_path: Path | str,
    checkpoint_path: Path | str,
    input_shape: tuple[int, ...] | None = None,
    *,
    device: str | Max7800xDevice,
    overlap_data: bool = False,
    avg_pool_rounding: bool = False,
    fifo: bool | None = None,
    calcx4: bool = False,
    read_ahead: bool = False,
) -> Ai8xModel:
    """Import a vendor YAML + ``-q`` checkpoint (input shape: given, else the sample's); the options
    are the vendor flags that matter (``--overlap-data``, ``--fifo``, ``--calcx4``, ...)."""
    cfg = read_yaml_config(yaml_path)
    ckpt = read_checkpoint(checkpoint_path)
    _check_arch(cfg, ckpt)
    pairs = _pair(cfg, ckpt)
    shape = _input_shape(cfg, input_shape)
    names = _layer_names(cfg)
    layers: list[Layer] = []
    shapes: dict[str, tuple[int, ...]] = {INPUT: shape}
    dev = get_device(device)
    for y, ck in zip(cfg.layers, pairs, strict=True):
        _check_next_sequence(cfg, y, names)
        inputs = _inputs(cfg, y, names)
        ctx = LayerContext(cfg.path, names[y.index], inputs, tuple(shapes[n] for n in inputs), dev)
        layer = build_layer(y, ck, ctx)
        shapes[layer.name] = layer.out_shape
        layers.append(layer)
    outputs = tuple(names[y.index] for y in cfg.layers if y.output or y is cfg.layers[-1])
    network = Network(cfg.arch, shape, tuple(layers), outputs, avg_pool_rounding)
    plan = _plan(cfg, network, dev, overlap_data, (calcx4, read_ahead))
    plan = check_streaming(cfg, network, plan, dev, fifo)
    modules = tuple(
        (names[y.index], ck.module) for y, ck in zip(cfg.layers, pairs, strict=True) if ck
    )
    return Ai8xModel(network, plan, cfg.arch, cfg.dataset, ckpt.epoch, modules, ckpt.extras)


def _check_arch(cfg: YamlConfig, ckpt: CheckpointData) -> None:
    if ckpt.arch is not None and ckpt.arch.lower() != cfg.arch.lower():
        raise ConfigError(
            f"`arch` {cfg.arch!r} does not match the checkpoint's arch {ckpt.arch!r}",
            where=f"{cfg.path}:{cfg.arch_line}",
            hint=f"is {ckpt.path} the checkpoint of this network?",
        )


def _pair(cfg: YamlConfig, ckpt: CheckpointData) -> list[CheckpointLayer | None]:
    """Positional pairing: the k-th weight key goes to the k-th weight-owning YAML layer (§5)."""
    owners = [y for y in cfg.layers if y.op is not Op.PASSTHROUGH]
    if len(owners) != len(ckpt.layers) and not duplicate_copy(ckpt, len(owners)):
        first = owners[len(ckpt.layers)] if len(owners) > len(ckpt.layers) else None
        where = f"{cfg.path}:{first.line}" if first else ckpt.path
        extra = ckpt.layers[len(owners)].weight_key if first is None else ""
        raise ConfigError(
            f"the YAML has {len(owners)} layers with weights but the checkpoint has "
            f"{len(ckpt.layers)}"
            + (f" (first unused: `{extra}`)" if extra else "")
            + (f"; {first.label()} gets none" if first else ""),
            where=where,
            hint="the YAML and the checkpoint must describe the same network, in the same order",
        )
    weights = iter(ckpt.layers)
    return [None if y.op is Op.PASSTHROUGH else next(weights) for y in cfg.layers]


def _layer_names(cfg: YamlConfig) -> dict[int, str]:
    """YAML `name`, else ``layerN``; unique."""
    names = {y.index: y.name or f"layer{y.index}" for y in cfg.layers}
    seen: dict[str, int] = {}
    for y in cfg.layers:
        name = names[y.index]
        if name in seen:
            raise ConfigError(
                f"{y.label()}: the name {name!r} is also the default name of layer {seen[name]}",
                where=f"{cfg.path}:{y.line_of('name')}",
                hint="choose another `name`",
            )
        seen[name] = y.index
    return names


def _check_next_sequence(cfg: YamlConfig, y: YamlLayer, names: dict[int, str]) -> None:
    """Only sequential execution is supported: `next_sequence` may name the next layer only."""
    ref = y.next_sequence
    if ref is None:
        return
    last = y.index == len(cfg.layers) - 1
    text = str(ref).lower()
    if (last and text == "stop") or (not last and ref in (y.index + 1, names[y.index + 1])):
        return
    raise ConfigError(
        f"{y.label()}: `next_sequence` {ref!r} changes the execution order",
        where=f"{cfg.path}:{y.line_of('next_sequence')}",
        hint="cnnforge runs layers in list order; reorder the layers (or use `sequence`)",
    )


def _inputs(cfg: YamlConfig, y: YamlLayer, names: dict[int, str]) -> tuple[str, ...]:
    """The producers read by ``y``: `in_sequences`, else the layer before it (or the input)."""
    if y.in_sequences is None:
        return (INPUT,) if y.index == 0 else (names[y.index - 1],)
    by_name = {n: i for i, n in names.items()}
    out = []
    for ref in y.in_sequences:
        if ref == -1 or (isinstance(ref, str) and ref.lower() == "input"):
            out.append(INPUT)
            continue
        index = ref if isinstance(ref, int) else by_name.get(ref)
        if index is None or not 0 <= index < y.index:
            raise ConfigError(
                f"{y.label()}: `in_sequences` entry {ref!r} is not an earlier layer",
                where=f"{cfg.path}:{y.line_of('in_sequences')}",
                hint="use the number or name of a layer before this one, or -1 for the input",
            )
        out.append(names[index])
    return tuple(out)


def sample_path(yaml_path: Path | str, dataset: str) -> Path | None:
    """The vendor's default sample input ``sample_<dataset>.npy`` near the YAML, if any."""
    base = Path(yaml_path).resolve().parent
    name = f"sample_{dataset.lower()}.npy"
    for folder in (base, base.parent / "samples", base.parent / "tests", base / "samples"):
        if (folder / name).is_file():
            return folder / name
    return None


def _input_shape(cfg: YamlConfig, given: tuple[int, ...] | None) -> tuple[int, ...]:
    if given is None:
        sample = sample_path(cfg.path, cfg.dataset)
        if sample is None:
            raise ConfigError(
                f"no input size: sample_{cfg.dataset.lower()}.npy not found near the YAML",
                where=cfg.path,
                hint="give the input shape (--input-shape C,H,W) or the sample input",
            )
        try:
            given = tuple(np.load(sample, mmap_mode="r", allow_pickle=False).shape)
        except (OSError, ValueError, EOFError) as exc:
            raise ConfigError(f"cannot read the sample input: {exc}", where=str(sample)) from None
    shape = tuple(int(n) for n in given)
    if len(shape) not in (2, 3) or any(n <= 0 for n in shape):
        raise ConfigError(
            f"input shape {list(shape)} must be C,H,W or C,L with positive sizes", where=cfg.path
        )
    if len(shape) == 3 and shape[2] == 1 and cfg.layers and cfg.layers[0].op is Op.CONV1D:
        shape = shape[:2]  # the vendor tool holds 1-D data as C x L x 1 (its samples too)
    check_input_shape(shape, "input shape")  # absurd sizes, inputs beyond memory (issue 27)
    return shape


def _plan(
    cfg: YamlConfig,
    network: Network,
    device: Max7800xDevice,
    overlap: bool,
    speedups: tuple[bool, bool] = (False, False),
) -> Plan:
    """Placements from the YAML with the vendor's defaults (docs/hardware/network-yaml.md §3.2, §4);
    ``speedups``: the vendor's --calcx4 and --read-ahead (every layer)."""
    data_format = _data_format(cfg)
    _check_speedups(cfg, device, speedups)
    placements: list[Placement] = []
    notes: list[str] = []
    for i, (y, layer) in enumerate(zip(cfg.layers, network.layers, strict=True)):
        _check_processors(cfg, y, network, layer, data_format if i == 0 else "HWC", device)
        prev_out = placements[-1].out_offset if placements else 0
        placements.append(_placement(cfg, y, i, layer, prev_out, speedups, device, notes))
    if cfg.snoop and not device.snoop_registers:
        raise ConfigError(
            f"`snoop` (the data-snooping registers) does not exist on the {device.name}",
            where=f"{cfg.path}:{cfg.snoop_line}",
            hint="remove it, or target a part that has them (--device MAX78002)",
        )
    return Plan(device, data_format, tuple(placements), allow_overlap=overlap,
                notes=tuple(notes), snoop=cfg.snoop)  # fmt: skip


def _placement(
    cfg: YamlConfig,
    y: YamlLayer,
    i: int,
    layer: Layer,
    prev_out: int,
    speedups: tuple[bool, bool],
    device: Max7800xDevice,
    notes: list[str],
) -> Placement:
    """Layer ``i``'s placement (input offset default: the previous output's); the defaults the
    vendor applies silently are added to ``notes``."""
    out_map = _check_output_map(cfg, y, layer, _output_map(cfg, y, i), device)
    if y.out_offset is None:
        notes.append(f"{y.label()}: `out_offset` defaults to 0")
    if y.pool_kind is not None and not y.pool_stride:
        notes.append(f"{y.label()}: pool stride defaults to 1")
    in_offset = prev_out if y.in_offset is None else y.in_offset
    out_offset = y.out_offset or 0
    for key, value in (("in_offset", in_offset), ("out_offset", out_offset)):
        if value % 4:
            raise ConfigError(
                f"{y.label()}: `{key}` {value:#x} is not a multiple of 4",
                where=f"{cfg.path}:{y.line_of(key)}",
                hint="offsets address 32-bit words",
            )
    return Placement(
        layer=layer.name,
        in_processors=y.processors,
        out_processors=out_map,
        in_offset=in_offset,
        out_offset=out_offset,
        write_gap=y.write_gap,
        bias_quadrant=y.bias_group,
        streaming=y.streaming,
        calcx4=y.calcx4 or speedups[0],
        read_ahead=y.readahead or speedups[1],
        tcalc=y.tcalc,
    )


def _check_speedups(cfg: YamlConfig, device: Max7800xDevice, flags: tuple[bool, bool]) -> None:
    """`calcx4`, `readahead` and `tcalc` (and --calcx4, --read-ahead) are MAX78002 options."""
    if device.speedups:
        return
    for flag, name in zip(flags, ("--calcx4", "--read-ahead"), strict=True):
        if flag:
            raise ConfigError(f"{name} is not supported on {device.name}", where=name)
    for y in cfg.layers:
        for key, on in (("calcx4", y.calcx4), ("readahead", y.readahead), ("tcalc", y.tcalc)):
            if on:
                raise ConfigError(
                    f"{y.label()}: `{key}` is not supported on {device.name}",
                    where=f"{cfg.path}:{y.line_of(key)}",
                    hint="it is a MAX78002 speed-up (the results are the same): drop it",
                )


def _data_format(cfg: YamlConfig) -> str:
    for y in cfg.layers[1:]:
        if y.data_format is not None:
            raise ConfigError(
                f"{y.label()}: `data_format` can only be set on the first layer",
                where=f"{cfg.path}:{y.line_of('data_format')}",
            )
    return cfg.layers[0].data_format or "HWC"


def _output_map(cfg: YamlConfig, y: YamlLayer, i: int) -> int:
    """`output_processors`, else the next layer's `processors`; the final layer: `output_map`."""
    if i == len(cfg.layers) - 1:
        if cfg.output_map is not None:
            return cfg.output_map
        if y.output_processors is not None:
            return y.output_processors
        return 0  # filled in by _check_output_map: packed from processor 0
    if y.output_processors is not None:
        return y.output_processors
    return cfg.layers[i + 1].processors


def _check_processors(
    cfg: YamlConfig, y: YamlLayer, net: Network, layer: Layer, fmt: str, dev: Max7800xDevice
) -> None:
    channels = layer_in_channels(net, layer)
    need = processors_per_pass(channels, dev)
    have = y.processors.bit_count()
    where = f"{cfg.path}:{y.line_of('processors')}"
    if have != need:
        raise ConfigError(
            f"{y.label()}: {channels} input channels use {passes(channels, dev)} pass(es) of "
            f"{need} processors, "
            f"but `processors` {y.processors:#018x} has {have}",
            where=where,
            hint=f"enable exactly {need} processors",
        )
    if fmt == "CHW" and any(((y.processors >> (4 * k)) & 0xF).bit_count() > 1 for k in range(16)):
        raise ConfigError(
            f"{y.label()}: CHW input, but several channels share a memory instance "
            f"(`processors` {y.processors:#018x})",
            where=where,
            hint="use at most one processor of each group of four (e.g. 0x111 for 3 channels)",
        )


def _check_output_map(
    cfg: YamlConfig, y: YamlLayer, layer: Layer, out_map: int, dev: Max7800xDevice
) -> int:
    need = processors_per_pass(layer.out_shape[0], dev)
    if out_map == 0:
        return (1 << need) - 1
    have = out_map.bit_count()
    if have != need:
        channels = layer.out_shape[0]
        raise ConfigError(
            f"{y.label()}: {channels} output channels use {passes(channels, dev)} pass(es) of "
            f"{need} processors, but the output map {out_map:#018x} has {have}",
            where=f"{cfg.path}:{y.line_of('output_processors')}",
            hint=f"set `output_processors` (or the next layer's `processors`) to {need} processors",
        )
    return out_map
