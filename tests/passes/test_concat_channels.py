"""concat-pad-channels: unequal concatenations get zero channels, exactly (float and integers)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.ir import INPUT, Network
from cnnforge.passes.concat_channels import concat_pad_channels
from cnnforge.passes.legalize import legalize_with_log
from cnnforge.passes.rewrites import apply_rules
from cnnforge.passes.verify import verify
from cnnforge.quant.ptq import quantize_network
from cnnforge.sim import simulate
from cnnforge.sim.float_eval import run_float
from support.plan import POOL2, conv, passthrough, upconv, with_weights


def _unet(cin: int, c1: int, c2: int, up: int, hw: int = 8, skip_pool: bool = False) -> Network:
    """enc1 (c1) -> enc2 (c2, pooled) -> up (``up`` ch) -> cat(up, enc1 or a pooled copy)."""
    skip = "enc1"
    layers = [conv("enc1", INPUT, cin, c1, hw), conv("enc2", "enc1", c1, c2, hw // 2, pool=POOL2)]
    if skip_pool:  # the skip comes from a passthrough: it cannot emit zeros itself
        layers.append(passthrough("pt", "enc1", (c1, hw, hw)))
        skip = "pt"
    layers += [
        upconv("up", "enc2", c2, up, hw),
        conv("dec", ("up", skip), up + c1, 4, hw),
        conv("head", ("dec", INPUT), 4 + cin, 3, hw, k=1),
    ]
    return with_weights(Network("u", (cin, hw, hw), tuple(layers)))


def _equal_parts(network: Network) -> bool:
    for layer in network.layers:
        if layer.is_concat:
            counts = [s[0] for s in network.input_shapes(layer)]
            if len(set(counts)) != 1 or counts[0] % 4:
                return False
    return True


@settings(max_examples=30, deadline=None)
@given(
    cin=st.integers(1, 5),
    c1=st.integers(1, 20),
    c2=st.integers(1, 12),
    up=st.integers(1, 20),
    skip_pool=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_concat_pad_is_exact(cin, c1, c2, up, skip_pool, seed):
    net = _unet(cin, c1, c2, up, skip_pool=skip_pool)
    out, log = apply_rules(net, (concat_pad_channels,))
    verify(out)
    assert _equal_parts(out)
    assert all(r.rule == "concat-pad-channels" for r in log)
    x = torch.randn((2, *net.input_shape), generator=torch.Generator().manual_seed(seed))
    want, got = run_float(net, x), run_float(out, x)
    torch.testing.assert_close(got["head"], want["head"], rtol=1e-5, atol=1e-5)
    # Integers: quantizing first, then padding, changes no bit of the simulator's output.
    q = quantize_network(net, 8, device=None)
    q_out, _ = apply_rules(q, (concat_pad_channels,))
    xi = torch.randint(-128, 128, (2, *net.input_shape), generator=torch.Generator().manual_seed(1))
    assert torch.equal(
        simulate(q, xi, device=None).outputs["head"],
        simulate(q_out, xi, device=None).outputs["head"],
    )


def test_producer_emits_zeros_and_readers_ignore_them():
    net = _unet(3, 16, 8, 8)  # cat(up 8, enc1 16): up grows to 16 channels
    out, log = legalize_with_log(net)
    (rec,) = [r for r in log if r.rule == "concat-pad-channels"][:1]
    assert "up emits 8 zero channels" in rec.detail
    assert out.layer("up").out_shape[0] == 16 and out.layer("dec").in_channels == 32
    assert not out.layer("up").weight[:, 8:].any() and not out.layer("dec").weight[:, 8:16].any()


def test_input_and_passthrough_parts_get_an_identity_copy():
    out, log = apply_rules(_unet(3, 8, 8, 8, skip_pool=True), (concat_pad_channels,))
    details = " ".join(r.detail for r in log)
    assert "identity conv copies input" in details  # cat(dec 4, input 3) -> [4, 4]
    assert _equal_parts(out)


def test_check_lists_the_rewrite_and_fits():
    from cnnforge.frontend.torch_fx import trace
    from cnnforge.passes.check import check_report
    from cnnforge.targets.max7800x.device import MAX78000
    from support.targets import rules_of
    from support.torch_models import Cat

    report = check_report(trace(Cat(4, 8).eval(), (3, 8, 8)), MAX78000, rules=rules_of(MAX78000))
    assert report.fits, report.violations
    assert [r.rule for r in report.rewrites].count("concat-pad-channels") == 1
