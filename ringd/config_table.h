/*
 * config_table.h - what the files of the configuration share among themselves:
 * config.c's key table (every key of ringd.conf with its type, field, range and
 * what a SIGHUP does with it), walked by config.c to parse values and by
 * settings.c to build, compare and update the running settings.  The rest of
 * the daemon sees the configuration only through config.h.
 */
#ifndef RINGD_CONFIG_TABLE_H
#define RINGD_CONFIG_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define CONFIG_KEY_MAX 63		/* longer keys are unknown anyway */

enum key_type {
	K_PATH,     /* char[size]; "" allowed */
	K_SOCK,     /* char[size], fits sun_path; "" allowed unless min = 1 */
	K_NAME,     /* char[size], non-empty, printable, no blanks */
	K_HOSTPORT, /* char[size], "" or ADDR:PORT */
	K_BOOL,     /* bool */
	K_INT,      /* int in [min, max] */
	K_U32,      /* uint32_t in [min, max] */
	K_POLL,     /* uint32_t in [min, max], "auto" = CONFIG_POLL_AUTO */
	K_SIZE32,   /* uint32_t size in [min, max] */
	K_SIZE64,   /* uint64_t size in [min, max] */
	K_RANK,     /* int, "auto" = -1 */
	K_LOGPLAN,  /* int CONFIG_LOG_*: auto, or a bool */
	K_LOGLEVEL, /* int, name or 3..7 */
	K_VERBOSE,  /* int log level, info + N */
	K_LIST,     /* char[CONFIG_LIST_MAX][32] at off, int count at off2 */
};

struct key_def {
	const char *name;	/* canonical, with '_' */
	enum key_type type;
	size_t off;		/* field in struct config */
	size_t off2;		/* K_LIST: its count */
	size_t size;		/* sizeof the field (a list: its whole array) */
	int64_t min, max;	/* numbers and sizes; K_SOCK: min 1 = required */
	enum config_live live;	/* what a SIGHUP does with a change */
	const char *scope;	/* CONFIG_LIVE: what the new value is for */
};

extern const struct key_def config_keys[];	/* in the documentation's order */
extern const size_t config_nkeys;

/* The entry of a key written with '_' or '-' ("peer-timeout-ms"), or NULL. */
const struct key_def *config_find_key(const char *key);
/* "err", "warn", "notice", "info", "debug" for 3..7; "?" otherwise. */
const char *config_level_name(int level);

#endif /* RINGD_CONFIG_TABLE_H */
