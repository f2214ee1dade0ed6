/*
 * settings.c - the running daemon's settings as a whole: built from the
 * command line (defaults, each --config file, then every other option, so the
 * command line wins), at start-up and again on SIGHUP, and compared and updated
 * key by key for a reload (config_diff, config_copy_key, config_key_text).  It
 * walks config.c's key table, so a key added there is read, compared and
 * reported here without another list to keep in step.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_table.h"
#include "../proto/proto.h"

/* A --key value or --key=value option at argv[*i]; *i moves past a value
 * taken from the next word.  0, or -1 with the reason in err (*usage set when
 * the command line is malformed rather than a value wrong). */
static int
set_option(struct config *c, int argc, char *const argv[], int *i, bool *usage, char *err,
	   size_t errlen)
{
	const char *a = argv[*i], *val, *eq;
	char key[CONFIG_KEY_MAX + 1], why[512];

	*usage = true;
	if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
		config_err(err, errlen, "unexpected argument '%.64s'", a);
		return -1;
	}
	if ((eq = strchr(a + 2, '=')) != NULL) {
		if ((size_t)(eq - a - 2) > CONFIG_KEY_MAX) {
			config_err(err, errlen, "unknown option '%.64s'", a);
			return -1;
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - a - 2), a + 2);
		val = eq + 1;
	} else {
		if (*i + 1 >= argc) {
			config_err(err, errlen, "option %.64s needs a value", a);
			return -1;
		}
		snprintf(key, sizeof(key), "%s", a + 2);
		val = argv[++*i];
	}
	*usage = false;
	if (config_set(c, key, val, why, sizeof(why)) != 0) {
		config_err(err, errlen, "--%s: %s", key, why);
		return -1;
	}
	return 0;
}

/* The checks that span keys, once every source is read. */
static int
check_settings(const struct config *c, bool *usage, char *err, size_t errlen)
{
	if (c->hosts[0] == '\0') {
		config_err(err, errlen, "--hosts FILE (or hosts = FILE in the --config file) is "
			   "required");
		*usage = true;
		return -1;
	}
	/* the credit scheme needs room for two whole segment frames */
	if (c->window_bytes < 2 * (uint64_t)c->segment_bytes + 2 * PROTO_FRAME_HDR) {
		config_err(err, errlen, "window (%u) must hold at least two segments (%u each)",
			   c->window_bytes, c->segment_bytes);
		return -1;
	}
	return 0;
}

int
config_from_args(struct config *c, int argc, char *const argv[], bool *usage,
		 char *err, size_t errlen)
{
	struct config tmp;
	int i, verbose = 0;

	*usage = false;
	config_defaults(&tmp);
	/* Every file first, so that the command line wins whatever the order. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--config") != 0)
			continue;
		if (i + 1 >= argc) {
			config_err(err, errlen, "option --config needs a value");
			*usage = true;
			return -1;
		}
		if (config_load(&tmp, argv[++i], err, errlen) != 0)
			return -1;
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--config") == 0)
			i++;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			return CONFIG_ARGS_HELP;
		else if (strcmp(a, "--version") == 0)
			return CONFIG_ARGS_VERSION;
		else if (strcmp(a, "-f") == 0 || strcmp(a, "--foreground") == 0)
			tmp.foreground = true;
		else if (a[0] == '-' && a[1] == 'v' && strspn(a + 1, "v") == strlen(a + 1))
			verbose += (int)strlen(a + 1);
		else if (set_option(&tmp, argc, argv, &i, usage, err, errlen) != 0)
			return -1;
	}
	/* -v: debug (info is the default already) */
	if (verbose > 0)
		tmp.log_level = 7;
	if (check_settings(&tmp, usage, err, errlen) != 0)
		return -1;
	*c = tmp;
	return 0;
}

/* Whether field k differs between a and b: the bytes that hold its value
 * (a string up to its NUL, a list's entries up to its count). */
static bool
field_differs(const struct key_def *k, const struct config *a, const struct config *b)
{
	const char *fa = (const char *)a + k->off, *fb = (const char *)b + k->off;
	int na, nb;

	switch (k->type) {
	case K_PATH:
	case K_SOCK:
	case K_NAME:
	case K_HOSTPORT:
		return strcmp(fa, fb) != 0;
	case K_LIST:
		na = *(const int *)((const char *)a + k->off2);
		nb = *(const int *)((const char *)b + k->off2);
		if (na != nb)
			return true;
		for (int i = 0; i < na; i++)
			if (strcmp(fa + (size_t)i * 32, fb + (size_t)i * 32) != 0)
				return true;
		return false;
	default:
		return memcmp(fa, fb, k->size) != 0;
	}
}

int
config_diff(const struct config *a, const struct config *b, struct config_change *out, int max)
{
	int n = 0;

	for (size_t i = 0; i < config_nkeys; i++) {
		bool first = true;

		for (size_t j = 0; j < i; j++)
			if (config_keys[j].off == config_keys[i].off)
				first = false;
		if (!first || !field_differs(&config_keys[i], a, b))
			continue;
		if (n < max) {
			out[n].name = config_keys[i].name;
			out[n].live = config_keys[i].live;
			out[n].scope = config_keys[i].scope;
		}
		n++;
	}
	return n;
}

int
config_copy_key(struct config *dst, const struct config *src, const char *name)
{
	const struct key_def *k = config_find_key(name);

	if (!k)
		return -1;
	memcpy((char *)dst + k->off, (const char *)src + k->off, k->size);
	if (k->type == K_LIST)
		memcpy((char *)dst + k->off2, (const char *)src + k->off2, sizeof(int));
	return 0;
}

static void
list_text(const char *list, int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
				      list + (size_t)i * 32);
}

int
config_key_text(const struct config *c, const char *name, char *buf, size_t len)
{
	const struct key_def *k = config_find_key(name);
	const char *f;
	const int *v;

	if (!k || len == 0)
		return -1;
	f = (const char *)c + k->off;
	v = (const int *)f;		/* for the keys held in an int */
	switch (k->type) {
	case K_BOOL:
		snprintf(buf, len, "%s", *(const bool *)f ? "yes" : "no");
		break;
	case K_INT:
		snprintf(buf, len, "%d", *v);
		break;
	case K_LOGPLAN:
		snprintf(buf, len, "%s", config_log_name(*v));
		break;
	case K_RANK:
		if (*v < 0)
			snprintf(buf, len, "auto");
		else
			snprintf(buf, len, "%d", *v);
		break;
	case K_LOGLEVEL:
		snprintf(buf, len, "%s", config_level_name(*v));
		break;
	case K_VERBOSE:
		snprintf(buf, len, "%d", *v >= 7);
		break;
	case K_POLL:
		if (*(const uint32_t *)f == CONFIG_POLL_AUTO) {
			snprintf(buf, len, "auto");
			break;
		}
		/* fall through */
	case K_U32:
	case K_SIZE32:
		snprintf(buf, len, "%" PRIu32, *(const uint32_t *)f);
		break;
	case K_SIZE64:
		snprintf(buf, len, "%" PRIu64, *(const uint64_t *)f);
		break;
	case K_LIST:
		list_text(f, *(const int *)((const char *)c + k->off2), buf, len);
		break;
	default:
		snprintf(buf, len, "%s", f);
	}
	return 0;
}
