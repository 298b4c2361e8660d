"""The float network as a generic accelerator runs it: fused steps on blob shapes, with operations
counted as xfDNN counts them (docs/generic-target.md "The model")."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from cnnforge.analysis.counting import layer_macs, pooled_shape, weight_and_bias_sizes
from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.targets.generic.rows import RowStage, layer_stages

#: Ops a generic engine cannot run: they are listed as unsupported (host work).
UNSUPPORTED_OPS = frozenset({Op.OPAQUE, Op.SOFTMAX})
_CONV_OPS = frozenset({Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D})
_ALIAS_OPS = frozenset({Op.FLATTEN, Op.CONCAT})


@dataclass(frozen=True)
class Step:
    """One fused layer: reads ``inputs`` (blob names), writes the blob called ``name``."""

    name: str
    kind: str  # label of the main layer: conv2d, maxpool, add, ...
    members: tuple[str, ...]  # the model-level layers fused into this step
    module_path: str
    inputs: tuple[str, ...]  # blobs read (concat/flatten resolved to their parts)
    pointwise: tuple[str, ...]  # inputs read element by element: in-place candidates
    out_shape: tuple[int, ...]
    macs: int  # multiply-accumulates of convolutions and linear layers
    ops: int  # xfDNN's count (module docstring)
    fc_ops: int  # 2 x MACs of fully connected layers, not in ``ops``
    weights: int  # weight + bias elements (a folded BatchNorm adds a bias)
    has_bias: bool
    supported: bool
    #: Row geometry of the main layer (rows.py): None when it reads whole blobs, so that the
    #: step cannot run on row bands (linear, flatten, softmax, opaque).
    stages: tuple[RowStage, ...] | None = None

    @property
    def tileable(self) -> bool:
        return self.stages is not None


@dataclass(frozen=True)
class StepGraph:
    """The fused steps in the network's order, the blob shapes and the network outputs."""

    name: str
    input_shape: tuple[int, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]  # blobs the network returns

    def shape(self, blob: str) -> tuple[int, ...]:
        if blob == INPUT:
            return self.input_shape
        return next(s.out_shape for s in self.steps if s.name == blob)

    def elements(self, blob: str) -> int:
        return math.prod(self.shape(blob))

    @property
    def unsupported(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if not s.supported)


def fuse_steps(network: Network) -> StepGraph:
    """Group ``network``'s layers (model-level or hardware) into the steps an engine runs."""
    readers: dict[str, int] = {}
    for layer in network.layers:
        for name in layer.inputs:
            readers[name] = readers.get(name, 0) + 1
    outputs = set(network.outputs)
    alias: dict[str, tuple[str, ...]] = {INPUT: (INPUT,)}
    steps: dict[str, Step] = {}  # blob name -> step, in order
    owner: dict[str, str] = {}  # model-level layer name -> step whose blob it is
    for layer in network.layers:
        parts = tuple(p for name in layer.inputs for p in alias[name])
        if layer.op in _ALIAS_OPS:
            alias[layer.name] = parts
            continue
        host = _absorber(layer, steps, owner, readers, outputs)
        if host is not None:
            steps[host.name] = _absorb(host, layer)
            owner[layer.name] = host.name
            alias[layer.name] = (host.name,)
            continue
        steps[layer.name] = _step(network, layer, parts)
        owner[layer.name] = layer.name
        alias[layer.name] = (layer.name,)
    outs = tuple(dict.fromkeys(p for name in network.outputs for p in alias[name]))
    return StepGraph(network.name, network.input_shape, tuple(steps.values()), outs)


def _absorber(layer, steps, owner, readers, outputs) -> Step | None:
    """The step that ``layer`` (BatchNorm or activation) fuses into, if any."""
    if layer.op not in (Op.BATCHNORM, Op.ACTIVATION) or len(layer.inputs) != 1:
        return None
    source = layer.inputs[0]
    if source == INPUT or readers.get(source, 0) != 1 or source in outputs or source not in owner:
        return None
    host = steps[owner[source]]
    if host.members[-1] != source or not host.supported:
        return None
    if layer.op is Op.BATCHNORM:  # folds into a conv/linear with nothing after it yet
        return host if host.kind in _FOLDS_BN and len(host.members) == 1 else None
    return host if not host.kind.startswith("activation") else None


_FOLDS_BN = frozenset({Op.CONV1D.value, Op.CONV2D.value, Op.CONVTRANSPOSE2D.value, "linear"})


def _absorb(host: Step, layer: Layer) -> Step:
    """``host`` with ``layer`` fused in: a folded BatchNorm gives a conv without bias one."""
    members = (*host.members, layer.name)
    if layer.op is Op.BATCHNORM and not host.has_bias:
        weights = host.weights + host.out_shape[0]
        return replace(host, members=members, weights=weights, has_bias=True)
    return replace(host, members=members)


def _step(network: Network, layer: Layer, parts: tuple[str, ...]) -> Step:
    in_shape = network.shape_of(layer.inputs[0]) if layer.inputs else ()
    macs = layer_macs(layer, in_shape)
    is_fc = layer.op is Op.LINEAR
    n_weights, n_bias = weight_and_bias_sizes(layer) if layer.has_weights else (0, 0)
    pointwise = parts if layer.op is Op.ELTWISE else ()
    kind = "activation" if layer.op is Op.ACTIVATION else layer.label()
    supported = layer.op not in UNSUPPORTED_OPS
    stages = layer_stages(layer, in_shape, layer.out_shape) if supported and in_shape else None
    if any(len(network.shape_of(p)) < 2 for p in parts):
        stages = None
    return Step(
        name=layer.name,
        kind=kind,
        members=(layer.name,),
        module_path=layer.module_path,
        inputs=parts,
        pointwise=pointwise,
        out_shape=layer.out_shape,
        macs=macs,
        ops=(0 if is_fc else 2 * macs) + _pool_ops(layer, in_shape) + _eltwise_ops(layer, in_shape),
        fc_ops=2 * macs if is_fc else 0,
        weights=n_weights + n_bias,
        has_bias=n_bias > 0,
        supported=supported,
        stages=stages,
    )


def _pool_ops(layer: Layer, in_shape: tuple[int, ...]) -> int:
    """Window area x pooled elements (a POOL layer, or a hardware layer's input pooling)."""
    if layer.pool is None:
        return 0
    pooled = layer.out_shape if layer.op is Op.POOL else pooled_shape(layer, in_shape)
    return math.prod(layer.pool.size) * math.prod(pooled)


def _eltwise_ops(layer: Layer, in_shape: tuple[int, ...]) -> int:
    """(operands - 1) x elements of an element-wise op (standalone or fused before a conv)."""
    if layer.op is Op.ELTWISE:
        return (len(layer.inputs) - 1) * math.prod(layer.out_shape)
    if layer.eltwise is not None and len(layer.inputs) > 1:
        return (len(layer.inputs) - 1) * math.prod(in_shape)
    return 0
