/*
 * config.h - ringd's settings: defaults, then ringd.conf (key = value lines, '#'
 * comments), then the command line.  Every key of the file has a command-line
 * twin (--key value); the parser reports the file, line and key of any error.
 * config.c's key table also says what a SIGHUP does with each key (enum
 * config_live), so reload.c and ringd.conf(5) follow one list.
 */
#ifndef RINGD_CONFIG_H
#define RINGD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_PATH_MAX 256
#define CONFIG_LIST_MAX 16
#define CONFIG_STREAMS_MAX 16 /* streams: proto's PROTO_STREAMS_MAX */

/* latency_doubling's values. */
enum { CONFIG_LOG_NO = 0, CONFIG_LOG_YES = 1, CONFIG_LOG_AUTO = 2 };
const char *config_log_name(int v);	/* "auto", "yes", "no" */
/* poll_us = auto: the loop's spin adapts (loop.c). */
#define CONFIG_POLL_AUTO UINT32_MAX

struct config {
	char hosts[CONFIG_PATH_MAX];	/* hosts = FILE: the hostfile (required) */
	int rank;			/* rank = N; -1: find ourselves among our addresses */
	char listen[CONFIG_PATH_MAX];   /* listen = ADDR:PORT; "" = our hostfile entry
					 * (or, with advertise, any address at its port) */
	char advertise[CONFIG_PATH_MAX]; /* advertise = HOST:PORT: where peers reach
						 * us (our hostfile entry) when it is no
						 * address of ours: NAT, a container, a pod */
	char socket[CONFIG_PATH_MAX];	/* socket = PATH: client socket (RING_DEFAULT_SOCKET) */
	char control[CONFIG_PATH_MAX];	/* control = PATH; "" = socket path + ".ctl" */
	char cluster[64];		/* cluster = NAME; peers must agree ("ringd") */
	bool foreground;		/* foreground = yes|no */
	int log_level;			/* log_level = err|warn|info|debug (or verbose = N) */
	uint32_t segment_bytes;		/* segment = SIZE: pipelining unit (1M) */
	uint64_t piece_bytes;		/* piece = SIZE: libring splits ops into these (64M) */
	uint32_t window_bytes;		/* window = SIZE: per-job credit per link (8M) */
	int streams; /* streams = N (0: as many as threads): TCP connections of a link
					 * this host connects (the connector's count
					 * rules a link) */
	int threads; /* threads = N (0: from the core count): the
					 * data path's, the engine's own counted */
	uint32_t heartbeat_ms;		/* heartbeat_ms = N (1000) */
	uint32_t evict_after_ms;	/* a host not heard this long is evicted (15000;
					 * 0: never) */
	uint32_t rejoin_after_ms;	/* ... readmitted once heard this long (2000),
					 * doubled for each recent flap */
	uint32_t peer_timeout_ms;	/* peer_timeout_ms = N (10000) */
	uint32_t op_timeout_ms;		/* op_timeout_ms = N: default per-op bound (60000) */
	uint32_t poll_us;               /* the loop's spin after work: CONFIG_POLL_AUTO
					 * (adaptive), N us, or 0 (off) */
	uint32_t connect_timeout_ms;	/* connect_timeout_ms = N: per attempt (5000) */
	int max_direct_links;		/* max_direct_links = N (16): direct links held */
	uint32_t direct_idle_ms;	/* direct_idle_ms = N (30000): unused that long,
					 * a direct link closes */
	uint32_t sndbuf, rcvbuf;	/* sndbuf = SIZE / rcvbuf = SIZE (0: kernel's) */
	int max_clients;		/* max_clients = N (256) */
	int max_clients_per_user;	/* max_clients_per_user = N (64): of one uid */
	uint32_t hello_timeout_ms;	/* hello_timeout_ms = N (5000): connect to HELLO */
	int max_jobs;			/* max_jobs = N (64) */
	uint64_t max_arena_bytes;	/* max_arena = SIZE per client (64G) */
	char tls_cert[CONFIG_PATH_MAX];	/* tls_cert = PATH */
	char tls_key[CONFIG_PATH_MAX];	/* tls_key = PATH */
	char tls_ca[CONFIG_PATH_MAX];	/* tls_ca = PATH */
	bool tls_ktls;			/* tls_ktls = yes|no: ask for kernel TLS (yes) */
	char secret_file[CONFIG_PATH_MAX];	/* secret_file = PATH: cluster secret */
	bool insecure;			/* insecure = yes: allow unauthenticated non-loopback */
	int latency_doubling;		/* latency_doubling = auto|yes|no (CONFIG_LOG_*):
					 * the log2 n plans by the cost model, wherever
					 * they exist, or never (the same on every host) */
	uint32_t hop_latency_us;	/* hop_latency_us = N: a hop's cost for the
					 * model (0: half the ring links' round trip) */
	uint32_t link_gbps;		/* link_gbps = N: the links' speed, for it */
	char allow_users[CONFIG_LIST_MAX][32];	/* allow_users = a, b (names or uids) */
	int n_allow_users;
	char allow_groups[CONFIG_LIST_MAX][32];	/* allow_groups = a, b */
	int n_allow_groups;
	char metrics_listen[CONFIG_PATH_MAX];	/* metrics_listen = ADDR:PORT ("" = off) */
};

/* What a SIGHUP does with a key whose value changed (the live column of
 * config.c's key table).  All but CONFIG_RESTART are applied to the running
 * daemon; how, is reload.c's business. */
enum config_live {
	CONFIG_RESTART = 0,	/* the ring or the peers' agreement is built on it:
				 * warned about, the running value stays */
	CONFIG_LIVE,		/* read when new work starts: the new value is put
				 * in force for the work its scope names */
	CONFIG_LIVE_LOG,	/* the log level, at once */
	CONFIG_LIVE_ACCESS,	/* allow_users, allow_groups: resolved, then swapped */
	CONFIG_LIVE_TLS,	/* the TLS files, re-read for new links (TLS stays on) */
	CONFIG_LIVE_SECRET,	/* the secret, re-read for new links (one stays set) */
};

/* A key whose value differs between two configurations (config_diff). */
struct config_change {
	const char *name;	/* canonical, as in ringd.conf */
	enum config_live live;	/* what a SIGHUP does with it */
	const char *scope;	/* CONFIG_LIVE: the work a new value is for
				 * ("new clients"); NULL otherwise */
};

/* config.c: the keys, their values, ringd.conf */
/* Writes a reason into an error buffer of errlen bytes, cut to fit; nothing
 * when err is NULL or errlen is 0.  The error helper of config.c, settings.c
 * and hostfile.c. */
void config_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Fills c with the defaults. */
void config_defaults(struct config *c);
/* Applies one key = value; returns 0 or -1 with a reason in err. */
int config_set(struct config *c, const char *key, const char *value, char *err, size_t errlen);
/* Reads at most max+1 bytes of a file (so that a larger one shows as len > max)
 * into a malloc'd buffer; 0, or -1 with "FILE: reason" in err.  Shared with the
 * hostfile reader. */
int config_read_file(const char *path, size_t max, char **buf, size_t *len, char *err,
		     size_t errlen);
/* Reads a ringd.conf; returns 0 or -1 with "FILE:LINE: reason" in err. */
int config_load(struct config *c, const char *path, char *err, size_t errlen);
/* Parses "4M", "512k", "1G", "123" (powers of 1024); returns 0 or -1. */
int config_parse_size(const char *s, uint64_t *out);
/* Parses ringd.conf text (len bytes, need not be NUL-terminated); name is the
 * FILE of "FILE:LINE: reason" in err.  config_load reads a file and calls this.
 * c is changed only when the whole text is valid. */
int config_parse_text(struct config *c, const char *text, size_t len, const char *name,
		      char *err, size_t errlen);
/* Splits "ADDR:PORT" or "[V6ADDR]:PORT" (listen, metrics_listen) into host (no
 * brackets) and port; returns 0 or -1 with a reason in err. */
int config_split_hostport(const char *s, char *host, size_t hostlen, int *port,
			  char *err, size_t errlen);
/* The i-th key of the table (from 0), its SIGHUP class in *live; NULL past
 * the last.  For tests and documentation that must list every key. */
const char *config_key_at(int i, enum config_live *live);

/* settings.c: the daemon's settings as a whole */
/* The settings of a command line: defaults, then each --config FILE in turn,
 * then every other option in order (--key value, --key=value, -v/-vv,
 * -f/--foreground), so the command line wins over the file; then the checks
 * that span keys (hosts given, window of two segments).  Used at start-up and
 * again on SIGHUP, so a reload sees the same overrides.  Returns 0,
 * CONFIG_ARGS_HELP or CONFIG_ARGS_VERSION (-h/--help, --version met: the
 * caller prints), or -1 with the reason in err (*usage is then true when the
 * reason is a malformed command line).  c is changed only on success. */
#define CONFIG_ARGS_HELP	1
#define CONFIG_ARGS_VERSION	2
int config_from_args(struct config *c, int argc, char *const argv[], bool *usage,
		     char *err, size_t errlen);
/* The keys whose values differ between a and b, in the table's order, into
 * out[0..max); keys that share a field (verbose and log_level) count once, as
 * the first in the table.  Returns how many differ (may exceed max). */
int config_diff(const struct config *a, const struct config *b,
		struct config_change *out, int max);
/* Copies the value of the key called name (and a list's count) from src to
 * dst; 0, or -1 for an unknown key. */
int config_copy_key(struct config *dst, const struct config *src, const char *name);
/* The value of the key called name in c, as ringd.conf would write it: numbers
 * and sizes in decimal, yes|no, the log level's name, "auto" for rank, a list
 * joined with ", " ("" when empty); 0, or -1 for an unknown key. */
int config_key_text(const struct config *c, const char *name, char *buf, size_t len);

#endif /* RINGD_CONFIG_H */
