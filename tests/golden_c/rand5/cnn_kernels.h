/* cnn_kernels.h: the layer record and kernels shared by every network cnnforge generates.
 *
 * A layer runs as prep (pooling, element-wise fold or concatenation into int8 CHW) then its main
 * operation (conv, transposed conv, linear, copy) and the output stage (shift-round, saturate,
 * activate; or the raw 32-bit accumulator when wide). The integer semantics mirror cnnforge's
 * arithmetic.py, rule by rule (docs/hardware/arithmetic.md). C99, no malloc, no floating point.
 */
#ifndef CNN_KERNELS_H
#define CNN_KERNELS_H

#include <stdint.h>

#define CNNK_MAX_OPERANDS 16

enum { CNNK_CONV, CNNK_CONVT, CNNK_LINEAR, CNNK_COPY };
enum { CNNK_ELT_NONE, CNNK_ELT_ADD, CNNK_ELT_SUB, CNNK_ELT_OR, CNNK_ELT_XOR };
enum { CNNK_POOL_NONE, CNNK_POOL_MAX, CNNK_POOL_AVG };
enum { CNNK_ACT_NONE, CNNK_ACT_RELU, CNNK_ACT_ABS };
#define CNNK_WBITS_BINARY 0

/* One hardware layer; offsets are byte offsets into the arena. */
typedef struct {
    const char *name;
    const char *shape; /* output shape as text, for probes */
    int32_t kind, n_in;
    int32_t in_off[CNNK_MAX_OPERANDS], in_ch[CNNK_MAX_OPERANDS];
    int32_t in_h, in_w;
    int32_t eltwise, pool, pool_first, avg_round;
    int32_t pool_kh, pool_kw, pool_sh, pool_sw, pool_dh, pool_dw;
    int32_t needs_prep, prep_off, prep_pad_h, prep_pad_w, pc, ph, pw;
    int32_t oc, oh, ow, out_off;
    int32_t kh, kw, sh, sw, pad_h, pad_w, dh, dw, groups;
    int32_t row_len, shift_k, act, wide, acc64, wbits;
    const int8_t *w8;    /* 8-bit weights, row_len per output channel */
    const uint8_t *wpk;  /* packed 1/2/4-bit or binary weights, rows padded to whole bytes */
    const int8_t *bias;  /* int8 bias-memory values, or NULL */
} cnnk_layer_t;

/* Working memory of one network: the arena, the accumulator plane, the weight rows. */
typedef struct {
    int32_t *arena;
    int32_t *acc;
    int8_t *wbuf;        /* two unpacked weight rows */
    const int8_t *wzero; /* one row of zeros (the missing second channel of a pair) */
} cnnk_ctx_t;

/* Run one layer: read its operands from the arena, write its output into the arena. */
void cnnk_run_layer(const cnnk_ctx_t *ctx, const cnnk_layer_t *L);

#endif /* CNN_KERNELS_H */
