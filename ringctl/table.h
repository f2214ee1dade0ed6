/*
 * table.h - ringctl's text output: left-aligned columns sized to their widest
 * cell, and the human forms of byte counts, durations and rank lists that the
 * cells hold.  Nothing here knows the daemon's documents; show.c fills tables.
 */
#ifndef RINGCTL_TABLE_H
#define RINGCTL_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TABLE_MAX_COLS 16

struct table;

/* A table whose header row is the ncols names given. NULL when out of memory. */
struct table *table_new(int ncols, const char *const *headers);
/* Appends one row of exactly the table's ncols cells (copied; NULL prints "-").
 * Returns 0 or -1 when out of memory. */
int table_add(struct table *t, const char *const *cells);
int table_rows(const struct table *t);
/* Prints the header and every row, columns two spaces apart, no trailing blanks. */
void table_print(const struct table *t, FILE *out);
void table_free(struct table *t);

/* "0 B", "512 B", "1.5 KiB", "12.0 MiB" ... (powers of 1024). Returns buf. */
char *fmt_bytes(uint64_t bytes, char *buf, size_t cap);
/* "850us" from microseconds; "12ms", "3.4s", "5m07s", "2h03m", "4d05h" from ms. */
char *fmt_us(uint64_t us, char *buf, size_t cap);
char *fmt_ms(uint64_t ms, char *buf, size_t cap);
/* "0-3,6,8-9" from a list of ranks (sorted copies are not made: runs are found
 * in the order given); cut with "..." when it would not fit in cap. */
char *fmt_ranks(const int64_t *ranks, size_t n, char *buf, size_t cap);

#endif /* RINGCTL_TABLE_H */
