/*
 * softmax.c -- written by cnnforge: software softmax of the accelerator's 32-bit outputs.
 * SPDX-License-Identifier: Apache-2.0
 * Inputs are Q17.14 fixed point, outputs Q15; exp(x) is evaluated as 2^(x / ln 2).
 */
#include <stdint.h>
#include "mxc.h"
#include "cnn.h"

static q31_t exp2_q14(q31_t x) /* 2^(x / 2^14) in Q14 for x <= 0 */
{
  int32_t whole = -((-x) >> 14), frac = x - whole * (1 << 14); /* frac in [0, 2^14) */
  /* 2^f ~ 1 + f (0.6565 + 0.3435 f) on [0, 1): error below 0.3 % */
  int64_t f = frac, poly = (1 << 14) + ((f * (10757 + ((5628 * f) >> 14))) >> 14);
  if (whole <= -31) return 0;
  return (q31_t) (poly >> (-whole));
}

void softmax_q17p14_q15(const q31_t *vec_in, const uint16_t dim_vec, q15_t *p_out)
{
  q31_t max = vec_in[0];
  int64_t sum = 0;
  uint16_t i;
  for (i = 1; i < dim_vec; i++)
    if (vec_in[i] > max) max = vec_in[i];
  for (i = 0; i < dim_vec; i++) /* x / ln 2 in Q14: 23637 / 2^14 ~ 1 / ln 2 */
    sum += exp2_q14((q31_t) (((int64_t) (vec_in[i] - max) * 23637) >> 14));
  for (i = 0; i < dim_vec; i++) {
    int64_t e = exp2_q14((q31_t) (((int64_t) (vec_in[i] - max) * 23637) >> 14));
    int64_t q = sum > 0 ? (e << 15) / sum : 0;
    p_out[i] = (q15_t) (q > 32767 ? 32767 : q);
  }
}

void softmax_shift_q17p14_q15(q31_t *vec_in, const uint16_t dim_vec, uint8_t in_shift, q15_t *p_out)
{
  uint16_t i;
  for (i = 0; i < dim_vec; i++)
    vec_in[i] <<= in_shift;
  softmax_q17p14_q15(vec_in, dim_vec, p_out);
}
