/*
 * dtype.h - the dtype table and the reduction kernels shared by ringd (which
 * reduces) and libring (which checks arguments).  Kernels are plain loops written
 * so the compiler vectorises them; float16 and bfloat16 are widened to float32,
 * combined, and rounded once (round to nearest even), which is what makes every
 * rank see the same bits.
 */
#ifndef PROTO_DTYPE_H
#define PROTO_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "ring_types.h"

size_t proto_dtype_size(int dtype);	/* 0 when out of range */
const char *proto_dtype_name(int dtype);	/* "float32", ...; "?" when out of range */
bool proto_dtype_is_float(int dtype);
const char *proto_op_name(int op);	/* "sum", ...; "?" */

/* 0 when dtype and op are valid together; RING_EINVAL otherwise (RING_AVG on an
 * integer or bool dtype, an enum out of range). */
int proto_reduce_check(int dtype, int op);

/* dst[i] = a[i] op b[i] for i < count.  dst may alias a or b.  RING_AVG reduces as
 * RING_SUM (the caller divides once at the end with proto_scale).  bool: SUM and
 * MAX are OR, PROD and MIN are AND, results 0/1.  Integers wrap.  Float MAX/MIN
 * propagate NaN. */
void proto_reduce(void *dst, const void *a, const void *b, size_t count, int dtype, int op);

/* buf[i] /= divisor, for float dtypes (RING_AVG's last step). */
void proto_scale(void *buf, size_t count, int dtype, uint32_t divisor);

float proto_f16_to_f32(uint16_t h);
uint16_t proto_f32_to_f16(float f);
float proto_bf16_to_f32(uint16_t h);
uint16_t proto_f32_to_bf16(float f);

#endif /* PROTO_DTYPE_H */
