/* cnn_kernels.c: layer kernels shared by every network cnnforge generates (see cnn_kernels.h).
 *
 * Rules cited as Rx.y are from docs/hardware/arithmetic.md; the Python twin is
 * src/cnnforge/arithmetic.py. Accumulation is int32 where cnnforge proved at generation time
 * that no accumulator can leave [-2^30, 2^30] (R1.4), int64 otherwise (acc64 layers).
 */
#include <stddef.h>
#include <stdint.h>

#include "cnn_kernels.h"

#define A8(ctx, off) ((int8_t *)(ctx)->arena + (off))
#define A32(ctx, off) ((ctx)->arena + (off) / 4)

/* floor(a / 2^k), k >= 1, without >> on negative values (implementation-defined in C, §8.2). */
static int64_t floor_shr(int64_t a, int32_t k)
{
    return a >= 0 ? a >> k : -1 - ((-1 - a) >> k);
}

static int32_t clamp8(int64_t v)
{
    return v < -128 ? -128 : v > 127 ? 127 : (int32_t)v;
}

/* Hardware activation on a saturated int8 value; Abs(-128) = 127 (R2.3, §8.5). */
static int32_t activate(int32_t y, int32_t act)
{
    if (act == CNNK_ACT_RELU)
        return y < 0 ? 0 : y;
    if (act == CNNK_ACT_ABS)
        return y < 0 ? (y == -128 ? 127 : -y) : y;
    return y;
}

/* Accumulator (bias included) to int8: y = floor(0.5 + acc * 2^s / 128) with k = 7 - s,
 * saturate, activate (R2.3). For k < 0 the value is shifted left; clamping acc to +-256 first
 * keeps the product small and gives the same saturated result (§8.3). */
static int8_t finish8(int64_t acc, int32_t k, int32_t act)
{
    int64_t y = acc;
    if (k > 0)
        y = floor_shr(acc + ((int64_t)1 << (k - 1)), k);
    else if (k < 0)
        y = (acc < -256 ? -256 : acc > 256 ? 256 : acc) * ((int64_t)1 << -k);
    return (int8_t)activate(clamp8(y), act);
}

/* Store output element i: int8 (finished) or the raw 32-bit accumulator when wide (R2.4). */
static void store(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, ptrdiff_t i, int64_t acc)
{
    if (L->wide)
        A32(ctx, L->out_off)[i] = (int32_t)acc;
    else
        A8(ctx, L->out_off)[i] = finish8(acc, L->shift_k, L->act);
}

/* ---- prep: pooling, element-wise fold, concatenation (R3, R4, R5) ------------------------- */

static int32_t operand(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, int32_t j, int32_t c,
                       int32_t y, int32_t x)
{
    return A8(ctx, L->in_off[j])[((ptrdiff_t)c * L->in_h + y) * L->in_w + x];
}

/* Left fold over n values, one saturation at the end unless told not to (R4.2, R4.4).
 * Or/Xor act on the int8 bit patterns, computed on unsigned bytes (portable). */
static int32_t fold(const cnnk_layer_t *L, const int32_t *v, int32_t n, int saturate)
{
    int32_t j, r = v[0];
    uint32_t u = (uint8_t)(int8_t)v[0];
    if (L->eltwise == CNNK_ELT_OR || L->eltwise == CNNK_ELT_XOR) {
        for (j = 1; j < n; ++j)
            u = L->eltwise == CNNK_ELT_OR ? u | (uint8_t)(int8_t)v[j] : u ^ (uint8_t)(int8_t)v[j];
        return u >= 128u ? (int32_t)u - 256 : (int32_t)u;
    }
    for (j = 1; j < n; ++j)
        r = L->eltwise == CNNK_ELT_ADD ? r + v[j] : r - v[j];
    return saturate ? clamp8(r) : r;
}

/* The layer's input before pooling: one operand, the concatenation (argument order), or the
 * element-wise fold of all operands. */
static int32_t source(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, int32_t c, int32_t y,
                      int32_t x, int saturate)
{
    int32_t j, v[CNNK_MAX_OPERANDS];
    if (L->eltwise == CNNK_ELT_NONE) {
        for (j = 0; c >= L->in_ch[j]; ++j)
            c -= L->in_ch[j];
        return operand(ctx, L, j, c, y, x);
    }
    for (j = 0; j < L->n_in; ++j)
        v[j] = operand(ctx, L, j, c, y, x);
    return fold(L, v, L->n_in, saturate);
}

/* Average of n int8 values from their sum: truncate toward zero (R3.5) or round half away
 * from zero (R3.6). C99 integer division truncates toward zero. */
static int32_t avg_divide(int32_t s, int32_t n, int32_t rounding)
{
    int32_t mag = s < 0 ? -s : s;
    mag = rounding ? (2 * mag + n) / (2 * n) : mag / n;
    return clamp8(s < 0 ? -mag : mag);
}

/* Pooled value at (c, y, x) of operand j, or of the source when j < 0 (R3.1-R3.6). */
static int32_t pooled(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, int32_t j, int32_t c,
                      int32_t y, int32_t x, int saturate)
{
    int32_t i, k, v, best = 0, sum = 0;
    for (i = 0; i < L->pool_kh; ++i)
        for (k = 0; k < L->pool_kw; ++k) {
            int32_t yy = y * L->pool_sh + i * L->pool_dh, xx = x * L->pool_sw + k * L->pool_dw;
            v = j < 0 ? source(ctx, L, c, yy, xx, saturate) : operand(ctx, L, j, c, yy, xx);
            best = (i == 0 && k == 0) || v > best ? v : best;
            sum += v;
        }
    if (L->pool == CNNK_POOL_MAX)
        return best;
    return avg_divide(sum, L->pool_kh * L->pool_kw, L->avg_round);
}

/* The main operation's input value at pooled position (c, y, x) (R4.3 for the order). */
static int32_t prep_value(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, int32_t c, int32_t y,
                          int32_t x, int saturate)
{
    int32_t j, v[CNNK_MAX_OPERANDS];
    if (L->pool == CNNK_POOL_NONE)
        return source(ctx, L, c, y, x, saturate);
    if (L->eltwise == CNNK_ELT_NONE || !L->pool_first)
        return pooled(ctx, L, -1, c, y, x, saturate);
    for (j = 0; j < L->n_in; ++j)
        v[j] = pooled(ctx, L, j, c, y, x, 1);
    return fold(L, v, L->n_in, saturate);
}

/* The int8 CHW tensor the main operation reads: the operand itself, or prepared in the arena
 * with prep_pad_h/prep_pad_w rows/columns of zeros around each plane (conv padding, R2.5,
 * §8.14: padding reads 0), so that the conv kernel needs no bounds checks. */
static const int8_t *prepare(const cnnk_ctx_t *ctx, const cnnk_layer_t *L)
{
    const int32_t hp = L->ph + 2 * L->prep_pad_h, wp = L->pw + 2 * L->prep_pad_w;
    int32_t c, y, x;
    int8_t *dst = A8(ctx, L->prep_off);
    if (!L->needs_prep)
        return A8(ctx, L->in_off[0]);
    for (c = 0; c < L->pc; ++c)
        for (y = 0; y < hp; ++y)
            for (x = 0; x < wp; ++x) {
                const int32_t yy = y - L->prep_pad_h, xx = x - L->prep_pad_w;
                const int inside = yy >= 0 && yy < L->ph && xx >= 0 && xx < L->pw;
                *dst++ = (int8_t)(inside ? prep_value(ctx, L, c, yy, xx, 1) : 0);
            }
    return A8(ctx, L->prep_off);
}

/* Passthrough: the prepared value itself, no activation; a standalone wide element-wise layer
 * keeps its fold unsaturated (R4.4), also through a following pooling. */
static void run_copy(const cnnk_ctx_t *ctx, const cnnk_layer_t *L)
{
    int32_t c, y, x;
    ptrdiff_t i = 0;
    for (c = 0; c < L->pc; ++c)
        for (y = 0; y < L->ph; ++y)
            for (x = 0; x < L->pw; ++x, ++i) {
                int32_t v = prep_value(ctx, L, c, y, x, !L->wide);
                if (L->wide)
                    A32(ctx, L->out_off)[i] = v;
                else
                    A8(ctx, L->out_off)[i] = (int8_t)v;
            }
}

/* ---- weights ------------------------------------------------------------------------------- */

/* Output channel oc's weights (row_len values): the 8-bit row itself, or unpacked into wbuf.
 * Packed rows hold little-endian bit fields, two's complement (R1.2); binary: bit 1 = -1,
 * bit 0 = +1. */
static const int8_t *weight_row(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, int32_t oc,
                                int32_t slot)
{
    int8_t *dst = ctx->wbuf + (ptrdiff_t)slot * L->row_len;
    const int32_t bits = L->wbits == CNNK_WBITS_BINARY ? 1 : L->wbits;
    const uint32_t mask = (1u << bits) - 1u, half = 1u << (bits - 1);
    const uint8_t *p;
    int32_t i;
    if (bits == 8)
        return L->w8 + (ptrdiff_t)oc * L->row_len;
    p = L->wpk + (ptrdiff_t)oc * (((ptrdiff_t)L->row_len * bits + 7) / 8);
    for (i = 0; i < L->row_len; ++i) {
        ptrdiff_t bit = (ptrdiff_t)i * bits;
        uint32_t u = ((uint32_t)p[bit / 8] >> (bit % 8)) & mask;
        if (L->wbits == CNNK_WBITS_BINARY)
            dst[i] = (int8_t)(u ? -1 : 1);
        else
            dst[i] = (int8_t)(u >= half ? (int32_t)u - (int32_t)(mask + 1u) : (int32_t)u);
    }
    return dst;
}

static int32_t bias_acc(const cnnk_layer_t *L, int32_t oc)
{
    return L->bias ? (int32_t)L->bias[oc] * 128 : 0; /* b << 7 (R1.5) */
}

/* ---- fast int32 kernels ----------------------------------------------------------------- */

#define BLOCK 16

/* Store n outputs of one row from register-blocked accumulators (R2.3 / R2.4). */
static void store_row(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, ptrdiff_t at, const int32_t *a,
                      int32_t n)
{
    int32_t j;
    for (j = 0; j < n; ++j)
        store(ctx, L, at + (ptrdiff_t)j, a[j]);
}

/* Taps of all input channels of one block of n outputs (row pointer p) for two output
 * channels at once (weights w0, w1; w1 all zero when there is no second channel): each input
 * value is loaded once for both. Unit-stride blocks of 16, 8 and 4 have constant trip counts
 * the compiler vectorizes at -O2. */
static void conv_block(const cnnk_layer_t *L, const int8_t *p, ptrdiff_t inplane, int32_t wp,
                       const int8_t *w0, const int8_t *w1, int32_t *a0, int32_t *a1, int32_t n)
{
    const int32_t icg = L->pc / L->groups, taps = L->kh * L->kw;
    int32_t ic, ky, kx, j, t;
    for (ic = 0; ic < icg; ++ic, p += inplane)
        for (ky = 0; ky < L->kh; ++ky)
            for (kx = 0; kx < L->kw; ++kx) {
                const int8_t *s = p + (ptrdiff_t)ky * L->dh * wp + (ptrdiff_t)kx * L->dw;
                const int32_t u = w0[ic * taps + ky * L->kw + kx];
                const int32_t v = w1[ic * taps + ky * L->kw + kx];
                if (u == 0 && v == 0)
                    continue;
                if (L->sw == 1 && n == BLOCK)
                    for (j = 0; j < BLOCK; ++j) {
                        a0[j] += u * s[j];
                        a1[j] += v * s[j];
                    }
                else if (L->sw == 1 && n == 8) /* the small planes of U-Net depths */
                    for (j = 0; j < 8; ++j) {
                        a0[j] += u * s[j];
                        a1[j] += v * s[j];
                    }
                else if (L->sw == 1 && n == 4)
                    for (j = 0; j < 4; ++j) {
                        a0[j] += u * s[j];
                        a1[j] += v * s[j];
                    }
                else
                    for (j = 0, t = 0; j < n; ++j, t += L->sw) {
                        a0[j] += u * s[t];
                        a1[j] += v * s[t];
                    }
            }
}

/* Convolution over the zero-padded input (hp x wp per plane, no bounds checks): blocks of up
 * to BLOCK outputs of a row accumulate in int32 over every input channel and tap, two output
 * channels of the same group at a time, then are finished and stored. */
static void run_conv(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, const int8_t *in)
{
    const int32_t icg = L->pc / L->groups, ocg = L->oc / L->groups;
    const int32_t wp = L->pw + 2 * L->prep_pad_w;
    const ptrdiff_t inplane = (ptrdiff_t)(L->ph + 2 * L->prep_pad_h) * wp;
    int32_t oc, oy, x, n, j, two = 0;
    for (oc = 0; oc < L->oc; oc += two ? 2 : 1) {
        two = oc + 1 < L->oc && (oc + 1) / ocg == oc / ocg;
        const int8_t *w0 = weight_row(ctx, L, oc, 0);
        const int8_t *w1 = two ? weight_row(ctx, L, oc + 1, 1) : ctx->wzero;
        const int8_t *group = in + (ptrdiff_t)(oc / ocg) * icg * inplane;
        const int32_t b0 = bias_acc(L, oc), b1 = two ? bias_acc(L, oc + 1) : 0;
        for (oy = 0; oy < L->oh; ++oy)
            for (x = 0; x < L->ow; x += BLOCK) {
                int32_t a0[BLOCK], a1[BLOCK];
                const int8_t *p = group + (ptrdiff_t)oy * L->sh * wp + (ptrdiff_t)x * L->sw;
                n = L->ow - x < BLOCK ? L->ow - x : BLOCK;
                for (j = 0; j < BLOCK; ++j) {
                    a0[j] = b0;
                    a1[j] = b1;
                }
                conv_block(L, p, inplane, wp, w0, w1, a0, a1, n);
                store_row(ctx, L, ((ptrdiff_t)oc * L->oh + oy) * L->ow + x, a0, n);
                if (two)
                    store_row(ctx, L, ((ptrdiff_t)(oc + 1) * L->oh + oy) * L->ow + x, a1, n);
            }
    }
}

/* Indices o in [0, n) with 0 <= o * s + base < size, as [*lo, *hi): hoisted bounds. */
static void span(int32_t base, int32_t s, int32_t size, int32_t n, int32_t *lo, int32_t *hi)
{
    int32_t a = base >= 0 ? 0 : (-base + s - 1) / s;
    int32_t b = base >= size ? 0 : (size - 1 - base) / s + 1;
    *lo = a;
    *hi = b < n ? b : n;
    if (*hi < *lo)
        *hi = *lo;
}

/* Transposed-convolution tap: input (iy, ix) adds to output (iy*s + ky*d - p, ...), which is
 * PyTorch's definition and equals the zero-stuffed, flipped convolution of R2.7. */
static void convt_tap(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, const int8_t *plane,
                      int32_t ky, int32_t kx, int32_t w)
{
    const int32_t by = ky * L->dh - L->pad_h, bx = kx * L->dw - L->pad_w;
    int32_t y0, y1, x0, x1, iy, ix;
    span(by, L->sh, L->oh, L->ph, &y0, &y1);
    span(bx, L->sw, L->ow, L->pw, &x0, &x1);
    if (x0 >= x1)
        return;
    for (iy = y0; iy < y1; ++iy) {
        int32_t *dst = ctx->acc + (ptrdiff_t)(iy * L->sh + by) * L->ow + (ptrdiff_t)x0 * L->sw + bx;
        const int8_t *src = plane + (ptrdiff_t)iy * L->pw + x0;
        for (ix = 0; ix < x1 - x0; ++ix)
            dst[(ptrdiff_t)ix * L->sw] += w * src[ix];
    }
}

/* Transposed conv, one output channel at a time: bias into the accumulator plane, every
 * non-zero tap scattered into it, then the plane finished. */
static void run_convt(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, const int8_t *in)
{
    const int32_t icg = L->pc / L->groups, ocg = L->oc / L->groups, taps = L->kh * L->kw;
    const ptrdiff_t plane = (ptrdiff_t)L->oh * L->ow, inplane = (ptrdiff_t)L->ph * L->pw;
    int32_t oc, ic, t;
    ptrdiff_t i;
    for (oc = 0; oc < L->oc; ++oc) {
        const int8_t *w = weight_row(ctx, L, oc, 0);
        const int8_t *group = in + (ptrdiff_t)(oc / ocg) * icg * inplane;
        const int32_t b = bias_acc(L, oc);
        for (i = 0; i < plane; ++i)
            ctx->acc[i] = b;
        for (ic = 0; ic < icg; ++ic)
            for (t = 0; t < taps; ++t)
                if (w[ic * taps + t] != 0)
                    convt_tap(ctx, L, group + ic * inplane, t / L->kw, t % L->kw,
                              w[ic * taps + t]);
        store_row(ctx, L, (ptrdiff_t)oc * plane, ctx->acc, (int32_t)plane);
    }
}

/* ---- generic int64 kernels (linear; conv/convt whose accumulators may exceed int32) -------- */

/* Linear on the flattened input, c*H*W + h*W + w order (R2.8, R5.1). */
static void run_linear(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, const int8_t *in)
{
    int32_t oc, i;
    for (oc = 0; oc < L->oc; ++oc) {
        const int8_t *w = weight_row(ctx, L, oc, 0);
        int64_t acc = bias_acc(L, oc);
        for (i = 0; i < L->row_len; ++i)
            acc += (int32_t)w[i] * in[i];
        store(ctx, L, (ptrdiff_t)oc, acc);
    }
}

/* Input index feeding output o through tap k, if any: conv o*s + k*d - p; transposed conv
 * (o + p - k*d) / s when that division is exact. */
static int tap_source(int32_t kind, int32_t o, int32_t k, int32_t s, int32_t d, int32_t p,
                      int32_t n, int32_t *i)
{
    int32_t t = o * s + k * d - p;
    if (kind == CNNK_CONVT) {
        t = o + p - k * d;
        if (t < 0 || t % s != 0)
            return 0;
        t /= s;
    }
    *i = t;
    return t >= 0 && t < n;
}

/* One output by gather over the (possibly zero-padded, see prepare) input of hp x wp. */
static int64_t direct_one(const cnnk_layer_t *L, const int8_t *group, const int8_t *w,
                          int32_t oy, int32_t ox)
{
    const int32_t icg = L->pc / L->groups, taps = L->kh * L->kw;
    const int32_t hp = L->ph + 2 * L->prep_pad_h, wp = L->pw + 2 * L->prep_pad_w;
    int32_t ic, ky, kx, iy, ix;
    int64_t acc = 0;
    for (ky = 0; ky < L->kh; ++ky) {
        if (!tap_source(L->kind, oy, ky, L->sh, L->dh, L->pad_h - L->prep_pad_h, hp, &iy))
            continue;
        for (kx = 0; kx < L->kw; ++kx) {
            if (!tap_source(L->kind, ox, kx, L->sw, L->dw, L->pad_w - L->prep_pad_w, wp, &ix))
                continue;
            for (ic = 0; ic < icg; ++ic)
                acc += (int32_t)w[ic * taps + ky * L->kw + kx] *
                       group[((ptrdiff_t)ic * hp + iy) * wp + ix];
        }
    }
    return acc;
}

/* Per-output gather with int64 accumulation: the reference path for large fan-in. */
static void run_direct(const cnnk_ctx_t *ctx, const cnnk_layer_t *L, const int8_t *in)
{
    const int32_t icg = L->pc / L->groups, ocg = L->oc / L->groups;
    int32_t oc, oy, ox;
    ptrdiff_t i = 0;
    for (oc = 0; oc < L->oc; ++oc) {
        const int8_t *w = weight_row(ctx, L, oc, 0);
        const ptrdiff_t inplane = (ptrdiff_t)(L->ph + 2 * L->prep_pad_h) * (L->pw + 2 * L->prep_pad_w);
        const int8_t *group = in + (ptrdiff_t)(oc / ocg) * icg * inplane;
        for (oy = 0; oy < L->oh; ++oy)
            for (ox = 0; ox < L->ow; ++ox, ++i)
                store(ctx, L, i, bias_acc(L, oc) + direct_one(L, group, w, oy, ox));
    }
}

void cnnk_run_layer(const cnnk_ctx_t *ctx, const cnnk_layer_t *L)
{
    const int8_t *in;
    if (L->kind == CNNK_COPY) {
        run_copy(ctx, L);
        return;
    }
    in = prepare(ctx, L);
    if (L->kind == CNNK_LINEAR)
        run_linear(ctx, L, in);
    else if (L->acc64)
        run_direct(ctx, L, in);
    else if (L->kind == CNNK_CONV)
        run_conv(ctx, L, in);
    else
        run_convt(ctx, L, in);
}
