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

/*
 * Compression on the wire: the format float32 data of a sum or average
 * travels in between daemons (the OP's PROTO_OP_F_WIRE bits, the
 * fingerprint's wire).  Every hop decodes, accumulates in float32 and encodes
 * again; both encodings round to nearest even (subnormals, Inf and NaN as the
 * conversions above).  The kernels are compress.c's.
 */
enum proto_wire { PROTO_WIRE_F32 = 0, PROTO_WIRE_BF16 = 1, PROTO_WIRE_FP16 = 2, PROTO_WIRE_COUNT };
const char *proto_wire_name(int wire);	/* "f32", "bf16", "fp16"; "?" */
int proto_wire_parse(const char *s);	/* an enum proto_wire ("f32" or "float32"...), or -1 */
/* Whether a collective (its base, enum proto_coll) of dtype and op may travel
 * compressed: all-reduce and reduce-scatter of float32, sum or average. */
bool proto_wire_applies(int coll, int dtype, int op);
/* Bytes on the wire of `bytes` bytes of float32 (a multiple of 4). */
static inline uint64_t
proto_wire_bytes(int wire, uint64_t bytes)
{
	return wire == PROTO_WIRE_F32 ? bytes : bytes / 2;
}
/* dst[i] = encode(src[i]); dst[i] = decode(src[i]); dst[i] = a[i] + decode(b[i])
 * (dst may alias a); buf[i] = decode(encode(buf[i])), the value every other
 * host decodes.  wire is BF16 or FP16. */
void proto_wire_encode(uint16_t *dst, const float *src, size_t n, int wire);
void proto_wire_decode(float *dst, const uint16_t *src, size_t n, int wire);
void proto_wire_sum(float *dst, const float *a, const uint16_t *b, size_t n, int wire);
void proto_wire_round(float *buf, size_t n, int wire);
/* dst[i] = decode(encode(a[i] + decode(b[i]))): a sum that is finished here,
 * in one pass. */
void proto_wire_sum_round(float *dst, const float *a, const uint16_t *b, size_t n, int wire);

#endif /* PROTO_DTYPE_H */
