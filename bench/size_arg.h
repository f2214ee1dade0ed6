/*
 * size_arg.h - the byte counts of the benchmarks' command lines (-b 8, -e 64M,
 * -i 1m): a number, then optionally K, M or G (powers of 1024) and B.  A header
 * of its own, in C that C++ compiles too, because bench/peers builds
 * mpi-allreduce.c and gloo-allreduce.cc alone, outside the tree's build.
 */
#ifndef BENCH_SIZE_ARG_H
#define BENCH_SIZE_ARG_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* s as a byte count into *out: 0, or -1 (out untouched) when s is not one. */
static inline int
parse_size(const char *s, size_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v *= 1024;
		end++;
		break;
	case 'm':
	case 'M':
		v *= 1024.0 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		v *= 1024.0 * 1024 * 1024;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

#endif /* BENCH_SIZE_ARG_H */
