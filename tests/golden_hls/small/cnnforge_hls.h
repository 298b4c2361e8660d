// cnnforge_hls.h: the HLS engines every generated network uses (docs/hls-target.md).
//
// Integer semantics (hls-target.md §2, the same as cnnforge's simulator): activations are
// ap_int<8> (value v / 128); weights ap_int<B>; the accumulator is ap_int<ACC> with ACC chosen
// so that no sum can overflow (H4); bias enters as b << 7 (H3); the output is
// floor(0.5 + acc * 2^s / 128), saturated to [-128, 127], then ReLU or Abs (H5, H6).
// Pragmas are guarded by __SYNTHESIS__: Vitis HLS defines it while synthesizing, and a host
// compiler (C-simulation) then never sees a pragma it does not know.
#ifndef CNNFORGE_HLS_H
#define CNNFORGE_HLS_H

// The open ap_types headers read a member before setting it in their default constructors;
// g++ -O2 reports that (inlined into every caller) as -Wmaybe-uninitialized. Silenced for the
// headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <ap_int.h>
#include <hls_stream.h>
#pragma GCC diagnostic pop

namespace cnnforge_hls {

typedef ap_int<8> act_t;  // A8 activation (H1)

// One AXI-Stream beat: an int8 value and TLAST (hls-target.md §5).
struct axis_t {
    act_t data;
    ap_uint<1> last;
};

// ROM element type of B-bit weights: ap_int<B> in synthesis; a plain signed char in
// C-simulation, whose constant initializer costs nothing (ap_int arrays are constructed at
// run time). Values are the same integers either way.
#ifdef __SYNTHESIS__
template <int B>
struct rom_of {
    typedef ap_int<B> type;
};
#else
template <int B>
struct rom_of {
    typedef signed char type;
};
#endif

enum Act { ACT_NONE = 0, ACT_RELU = 1, ACT_ABS = 2 };

// Saturate to int8 (H5) and activate (H6: Abs(-128) = 127).
template <int ACT>
inline act_t saturate_activate(long long v) {
    if (v > 127) v = 127;
    if (v < -128) v = -128;
    if (ACT == ACT_RELU && v < 0) v = 0;
    if (ACT == ACT_ABS && v < 0) v = (v == -128) ? 127 : -v;
    return act_t(v);
}

// Accumulator to output (H5): K = 7 - total shift; round half up by adding 2^(K-1) before an
// arithmetic right shift (K > 0), or shift left by -K.
template <int K, int ACT, int W>
inline act_t finish(const ap_int<W> &acc) {
    const int right = K > 0 ? K : 0;
    const int left = K < 0 ? -K : 0;
    ap_int<W + 24> t = acc;
    t += ap_int<W + 24>(K > 0 ? 1 : 0) << (K > 0 ? K - 1 : 0);
    t >>= right;
    t <<= left;
    return saturate_activate<ACT>(t.to_int64());
}

// The accumulator's start: the bias b << 7 (H3), or 0 for a layer without bias.
template <int ACC>
inline ap_int<ACC> bias_start(const typename rom_of<8>::type *bias, int oc) {
    return bias ? ap_int<ACC>(ap_int<16>(bias[oc]) << 7) : ap_int<ACC>(0);
}

// A tensor in a buffer, read as (channel, row, column) of a C x H x W CHW layout.
template <act_t *BUF, int H, int W>
struct Tensor {
    static act_t at(int c, int y, int x) { return BUF[(c * H + y) * W + x]; }
};

// Input pooling of SRC without padding (H7): max over the window (rows y*S + i*D), or the
// average of its sum, truncated or rounded half away from zero.
template <class SRC, int KH, int KW, int SH, int SW, int DH, int DW, bool AVG, bool ROUND>
struct Pool {
    static act_t at(int c, int y, int x) {
        int best = -128;
        int sum = 0;
        for (int i = 0; i < KH; i++) {
            for (int j = 0; j < KW; j++) {
#ifdef __SYNTHESIS__
#pragma HLS UNROLL
#endif
                const int v = SRC::at(c, y * SH + i * DH, x * SW + j * DW).to_int();
                best = v > best ? v : best;
                sum += v;
            }
        }
        if (!AVG) return act_t(best);
        const int n = KH * KW;
        const int mag = sum < 0 ? -sum : sum;
        const int q = ROUND ? (2 * mag + n) / (2 * n) : mag / n;
        return saturate_activate<ACT_NONE>(sum < 0 ? -q : q);
    }
};

// Conv2d engine, stride 1 (hls-target.md §3): a line buffer of K padded input rows, filled
// one value per cycle; each output pixel takes C*K*K products, P per cycle (PIPELINE II=1).
// Weights are PyTorch's (OC, C, K, K) in ROM.
template <class IN, int C, int H, int W, int OC, int K, int PAD, int P, int ACC, int SK,
          int ACT, int WB>
void conv2d_engine(const typename rom_of<WB>::type *weights,
                   const typename rom_of<8>::type *bias, act_t *out) {
    const int HP = H + 2 * PAD, WP = W + 2 * PAD, OH = HP - K + 1, OW = WP - K + 1;
    const int TAPS = C * K * K;
    static act_t line[K][WP][C];
#ifdef __SYNTHESIS__
#pragma HLS ARRAY_PARTITION variable=line complete dim=1
#pragma HLS ARRAY_PARTITION variable=line cyclic factor=P dim=3
#endif
    for (int r = 0; r < HP; r++) {
        for (int x = 0; x < WP; x++) {
            for (int c = 0; c < C; c++) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II=1
#endif
                const int iy = r - PAD, ix = x - PAD;
                const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                line[r % K][x][c] = inside ? IN::at(c, iy, ix) : act_t(0);
            }
        }
        if (r < K - 1) continue;
        const int oy = r - K + 1;
        for (int ox = 0; ox < OW; ox++) {
            for (int oc = 0; oc < OC; oc++) {
                ap_int<ACC> acc = bias_start<ACC>(bias, oc);
                for (int t0 = 0; t0 < TAPS; t0 += P) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II=1
#endif
                    for (int u = 0; u < P; u++) {
#ifdef __SYNTHESIS__
#pragma HLS UNROLL
#endif
                        const int t = t0 + u;
                        if (t < TAPS) {
                            const int c = t / (K * K), ky = (t / K) % K, kx = t % K;
                            const ap_int<WB> w = weights[oc * TAPS + t];
                            acc += line[(oy + ky) % K][ox + kx][c] * w;
                        }
                    }
                }
                out[(oc * OH + oy) * OW + ox] = finish<SK, ACT>(acc);
            }
        }
    }
}

// ConvTranspose2d engine (R2.7 as a gather): out(oc, oy, ox) sums in(c, iy, ix) * w(c, oc,
// ky, kx) over oy = iy*S - PAD + ky; the address is computed every cycle, as the reference design does.
// Weights are PyTorch's (C, OC, K, K) in ROM.
template <class IN, int C, int H, int W, int OC, int OH, int OW, int K, int S, int PAD,
          int P, int ACC, int SK, int ACT, int WB>
void transconv_engine(const typename rom_of<WB>::type *weights,
                      const typename rom_of<8>::type *bias, act_t *out) {
    const int TAPS = C * K * K;
    for (int oy = 0; oy < OH; oy++) {
        for (int ox = 0; ox < OW; ox++) {
            for (int oc = 0; oc < OC; oc++) {
                ap_int<ACC> acc = bias_start<ACC>(bias, oc);
                for (int t0 = 0; t0 < TAPS; t0 += P) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II=1
#endif
                    for (int u = 0; u < P; u++) {
#ifdef __SYNTHESIS__
#pragma HLS UNROLL
#endif
                        const int t = t0 + u;
                        const int c = t / (K * K), ky = (t / K) % K, kx = t % K;
                        const int ry = oy + PAD - ky, rx = ox + PAD - kx;
                        if (t < TAPS && ry >= 0 && rx >= 0 && ry % S == 0 && rx % S == 0 &&
                            ry / S < H && rx / S < W) {
                            const ap_int<WB> w = weights[(c * OC + oc) * K * K + ky * K + kx];
                            acc += IN::at(c, ry / S, rx / S) * w;
                        }
                    }
                }
                out[(oc * OH + oy) * OW + ox] = finish<SK, ACT>(acc);
            }
        }
    }
}

// Passthrough engine: pooling / element-wise / concatenation only, one value per cycle.
template <class IN, int C, int H, int W>
void copy_engine(act_t *out) {
    for (int i = 0; i < C * H * W; i++) {
#ifdef __SYNTHESIS__
#pragma HLS PIPELINE II=1
#endif
        out[i] = IN::at(i / (H * W), (i / W) % H, i % W);
    }
}

}  // namespace cnnforge_hls

#endif  // CNNFORGE_HLS_H
