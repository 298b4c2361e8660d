"""The AXI-Lite register map of an HLS top function as a markdown table (regmap.md); offsets from
the target (docs/hls-target.md §5)."""

from __future__ import annotations

from cnnforge.ir import Network
from cnnforge.targets.hls.buffer_plan import HlsPlan
from cnnforge.targets.hls.device import HlsTarget


def register_rows(target: HlsTarget) -> list[tuple[str, str, str]]:
    """(offset, name, description) of every register, in address order."""
    return [
        (f"0x{target.reg_control:03X}", "CONTROL", "{ap_start, ap_done, ap_idle} (bits 0, 1, 2)"),
        (f"0x{target.reg_height_width:03X}", "HEIGHT_WIDTH", "{height, width}: [31:16], [15:0]"),
        (f"0x{target.reg_kernel_padding:03X}", "KERNEL_PADDING", "{kernel_size, padding}"),
        (f"0x{target.reg_channels:03X}", "CHANNELS", "{in_channels, out_channels}"),
        (f"0x{target.reg_layer_select:03X}", "LAYER_SELECT", "layer shown at 0x010-0x030 (W)"),
        (f"0x{target.reg_layer_count:03X}", "LAYER_COUNT", "number of layers (R)"),
        (f"0x{target.reg_status:03X}", "STATUS", "bit 0: TLAST misplaced on the input (R)"),
    ]


def regmap_markdown(network: Network, plan: HlsPlan, target: HlsTarget) -> str:
    """regmap.md: the registers, then the geometry each layer shows through them."""
    shape = "x".join(map(str, network.input_shape))
    lines = [
        f"# AXI-Lite register map of `cnnforge_top` ({network.name}, target {target.name})",
        "",
        "Bundle `ctrl`; offsets compatible with the reference design. AXI-Stream `in_stream`",
        f"carries the {shape} int8 input (CHW), `out_stream` the outputs.",
        "",
        "| Offset | Register | Description |",
        "|--------|----------|-------------|",
        *(f"| {o} | {n} | {d} |" for o, n, d in register_rows(target)),
        "",
        "## Per-layer geometry (read back after writing LAYER_SELECT)",
        "",
        "| # | Layer | Engine | height x width | kernel, padding | in -> out channels |",
        "|---|-------|--------|----------------|-----------------|--------------------|",
    ]
    for i, lp in enumerate(plan.layers):
        x = lp.layer
        c_in = (
            network.shape_of(x.inputs[0])[0]
            if x.eltwise is not None
            else sum(network.shape_of(n)[0] for n in x.inputs)
        )
        k = x.kernel_size[0] if x.has_weights else 0
        pad = x.padding[0] if x.has_weights and x.padding else 0
        lines.append(
            f"| {i} | {x.name} | {lp.engine} | {x.out_shape[1]} x {x.out_shape[2]} | "
            f"{k}, {pad} | {c_in} -> {x.out_shape[0]} |"
        )
    return "\n".join(lines) + "\n"
