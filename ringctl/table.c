/*
 * table.c - ringctl's text tables and the human forms of numbers.  A table keeps
 * copies of its cells until it is printed, because a column's width is known only
 * once every row is in; the tables ringctl prints have one row per peer or job,
 * so memory is never an issue and simplicity wins.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

struct table {
	int ncols;		/* cells per row, header included */
	int nrows;		/* rows below the header */
	int cap;		/* rows the cells array has room for */
	char **cells;		/* (1 + cap) * ncols strings; row 0 is the header */
};

static int
table_grow(struct table *t)
{
	int cap = t->cap ? t->cap * 2 : 8;
	char **cells = realloc(t->cells, (size_t)(1 + cap) * (size_t)t->ncols * sizeof(*cells));

	if (cells == NULL)
		return -1;
	t->cells = cells;
	t->cap = cap;
	return 0;
}

static int
table_put_row(struct table *t, int row, const char *const *cells)
{
	for (int c = 0; c < t->ncols; c++) {
		char *s = strdup(cells[c] != NULL ? cells[c] : "-");

		if (s == NULL) {
			while (c-- > 0)
				free(t->cells[row * t->ncols + c]);
			return -1;
		}
		t->cells[row * t->ncols + c] = s;
	}
	return 0;
}

struct table *
table_new(int ncols, const char *const *headers)
{
	struct table *t;

	if (ncols < 1 || ncols > TABLE_MAX_COLS)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->ncols = ncols;
	if (table_grow(t) < 0 || table_put_row(t, 0, headers) < 0) {
		free(t->cells);
		free(t);
		return NULL;
	}
	return t;
}

int
table_add(struct table *t, const char *const *cells)
{
	if (t->nrows == t->cap && table_grow(t) < 0)
		return -1;
	if (table_put_row(t, 1 + t->nrows, cells) < 0)
		return -1;
	t->nrows++;
	return 0;
}

int
table_rows(const struct table *t)
{
	return t->nrows;
}

void
table_print(const struct table *t, FILE *out)
{
	size_t width[TABLE_MAX_COLS] = { 0 };

	for (int r = 0; r <= t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			size_t w = strlen(t->cells[r * t->ncols + c]);

			if (w > width[c])
				width[c] = w;
		}
	for (int r = 0; r <= t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];

			if (c == t->ncols - 1)
				fprintf(out, "%s", s);
			else
				fprintf(out, "%-*s  ", (int)width[c], s);
		}
		fputc('\n', out);
	}
}

void
table_free(struct table *t)
{
	if (t == NULL)
		return;
	for (int i = 0; i < (1 + t->nrows) * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

char *
fmt_bytes(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, cap, "%" PRIu64 " B", bytes);
		return buf;
	}
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	/* 1023.96 KiB would print as "1024.0 KiB": carry into the next unit. */
	if (v >= 1023.95 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, cap, "%.1f %s", v, unit[u]);
	return buf;
}

char *
fmt_ms(uint64_t ms, char *buf, size_t cap)
{
	uint64_t s = ms / 1000;

	if (ms < 1000)
		snprintf(buf, cap, "%" PRIu64 "ms", ms);
	else if (ms < 60000)
		snprintf(buf, cap, "%.1fs", (double)ms / 1000.0);
	else if (s < 3600)
		snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
	else
		snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
	return buf;
}

char *
fmt_us(uint64_t us, char *buf, size_t cap)
{
	if (us < 1000)
		snprintf(buf, cap, "%" PRIu64 "us", us);
	else if (us < 10000)
		snprintf(buf, cap, "%.1fms", (double)us / 1000.0);
	else
		fmt_ms(us / 1000, buf, cap);
	return buf;
}

char *
fmt_ranks(const int64_t *ranks, size_t n, char *buf, size_t cap)
{
	size_t len = 0;

	if (cap == 0)
		return buf;
	buf[0] = '\0';
	if (n == 0) {
		snprintf(buf, cap, "-");
		return buf;
	}
	for (size_t i = 0; i < n;) {
		size_t j = i;
		char item[48];
		int k;

		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (j == i)
			k = snprintf(item, sizeof(item), "%s%" PRId64, i ? "," : "", ranks[i]);
		else
			k = snprintf(item, sizeof(item), "%s%" PRId64 "-%" PRId64, i ? "," : "",
				     ranks[i], ranks[j]);
		/* Keep room for ",..." so a cut list still says it was cut. */
		if (len + (size_t)k + (j + 1 < n ? 4 : 0) >= cap) {
			if (len + 4 < cap)
				snprintf(buf + len, cap - len, len ? ",..." : "...");
			return buf;
		}
		memcpy(buf + len, item, (size_t)k + 1);
		len += (size_t)k;
		i = j + 1;
	}
	return buf;
}
