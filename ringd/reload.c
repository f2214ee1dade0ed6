/*
 * reload.c - SIGHUP: read the configuration again and apply what can change
 * under a running ring.
 *
 * The settings are rebuilt exactly as at start-up (config_from_args: defaults,
 * the --config file, then the command line, which still wins), and compared
 * key by key with the running ones.  What only decides new work is applied:
 * the log level, who may attach (allow_users, allow_groups), the TLS files
 * and the cluster secret (for peer connections made from now on; live links
 * keep their session), and the local limits read when a client, job or
 * operation starts (max_clients, max_clients_per_user, hello_timeout_ms,
 * max_jobs, max_arena, op_timeout_ms).  Every
 * other changed key (hosts, rank, listen, socket, cluster, segment, ...) would
 * break the ring or its agreement with the peers: it is named in a warning and
 * keeps its running value until a restart.  The TLS files and the secret are
 * read again on every SIGHUP even when their paths are the same, since
 * renewing a certificate rewrites the file in place.
 *
 * Everything is checked before anything is applied: a file that does not
 * parse, a user that does not exist, a certificate that does not load leaves
 * the daemon as it was, with one error logged.  Under systemd the reload is
 * framed by RELOADING=1 and READY=1 once the daemon has said READY=1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ringd.h"
#include "../proto/log.h"

#define RELOAD_KEYS_MAX 64

/* Keys applied as they are; TLS and the secret are decided below. */
static const char *const live_keys[] = {
	"log_level", "allow_users", "allow_groups", "op_timeout_ms", "max_clients",
	"max_clients_per_user", "hello_timeout_ms", "max_jobs", "max_arena",
};

static bool
is_live_key(const char *key)
{
	for (size_t i = 0; i < sizeof(live_keys) / sizeof(live_keys[0]); i++)
		if (strcmp(live_keys[i], key) == 0)
			return true;
	return false;
}

static bool
is_tls_key(const char *key)
{
	return strncmp(key, "tls_", 4) == 0;
}

static const char *
level_name(int level)
{
	static const char *const names[] = { "err", "warn", "notice", "info", "debug" };

	return level >= 3 && level <= 7 ? names[level - 3] : "?";
}

/* "alice, 1001" or "(none)" */
static void
list_text(char (*list)[32], int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", list[i]);
	if (n == 0)
		snprintf(buf, len, "(none)");
}

/* The --config file the command line names (the last one), or NULL. */
static const char *
config_file(const struct ringd *rd)
{
	const char *path = NULL;

	for (int i = 1; i + 1 < rd->argc; i++)
		if (strcmp(rd->argv[i], "--config") == 0)
			path = rd->argv[++i];
	return path;
}

static bool
same_hosts(const struct hostfile *a, const struct hostfile *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->hosts[i].host, b->hosts[i].host) != 0 ||
		    a->hosts[i].port != b->hosts[i].port)
			return false;
	return true;
}

/* The hostfile is the ring: a change to it takes every daemon's restart. */
static int
check_hostfile(const struct ringd *rd)
{
	struct hostfile hf = { 0 };
	char err[512];
	int changed;

	if (hostfile_load(&hf, rd->cfg.hosts, HOSTFILE_DEFAULT_PORT, err, sizeof(err)) != 0) {
		log_warn("reload: cannot read the hostfile again (%s); the ring goes on with "
			 "the %d hosts it has", err, rd->world);
		return 0;
	}
	changed = !same_hosts(&hf, &rd->hf);
	if (changed)
		log_warn("reload: the hostfile %s changed (%d hosts now, %d running): the ring's "
			 "hosts change only when every daemon restarts", rd->cfg.hosts, hf.n,
			 rd->world);
	hostfile_free(&hf);
	return changed;
}

static void
notify_done(struct ringd *rd)
{
	char msg[PROTO_TEXT_MAX + 64];

	if (!rd->sd_ready)
		return;
	ringd_status_text(rd, msg, sizeof(msg));
	ringd_notify("READY=1\n%s", msg);
}

void
ringd_reload(struct ringd *rd)
{
	const char *path = config_file(rd), *changed[RELOAD_KEYS_MAX];
	struct config nc, *oc = &rd->cfg;
	char err[512], what[512], a[600], b[600];
	bool usage, tls_old, tls_new, access, secret_old, secret_new;
	void *tls_ctx = NULL;
	int n, i, applied = 0, restart = 0, r;

	log_info("SIGHUP: reloading %s", path ? path : "(no --config file: the TLS and "
		 "secret files only)");
	if (rd->sd_ready)
		ringd_notify("RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading %s",
			     now_us(), path ? path : "the configuration");

	/* ---- check everything first ---- */
	if (config_from_args(&nc, rd->argc, rd->argv, &usage, err, sizeof(err)) != 0)
		goto refused;
	n = config_diff(oc, &nc, changed, RELOAD_KEYS_MAX);
	if (n > RELOAD_KEYS_MAX)
		n = RELOAD_KEYS_MAX;
	access = false;
	for (i = 0; i < n; i++)
		if (strncmp(changed[i], "allow_", 6) == 0)
			access = true;
	if (access && access_prepare(&nc, err, sizeof(err)) != 0)
		goto refused;
	if (auth_reload_prepare(&nc, err, sizeof(err)) != 0)
		goto refused;
	tls_old = oc->tls_cert[0] != '\0';
	tls_new = nc.tls_cert[0] != '\0';
	secret_old = oc->secret_file[0] != '\0';
	secret_new = nc.secret_file[0] != '\0';
	if (tls_old && tls_new &&
	    (tls_ctx = tls_reload_prepare(rd, &nc, err, sizeof(err))) == NULL) {
		auth_reload_abort();
		goto refused;
	}

	/* ---- then apply ---- */
	/* a more verbose level at once, so that this reload's own lines show */
	if (nc.log_level > oc->log_level)
		log_set_level(nc.log_level);
	for (i = 0; i < n; i++) {
		const char *k = changed[i];

		if (is_live_key(k) || (is_tls_key(k) && tls_old && tls_new) ||
		    (strcmp(k, "secret_file") == 0 && secret_old && secret_new))
			continue;
		restart++;
		if (is_tls_key(k) && tls_old != tls_new)
			log_warn("reload: %s: TLS on peer links is turned %s only by a restart; "
				 "peers stay on %s", k, tls_new ? "on" : "off",
				 tls_old ? "TLS" : "plain TCP");
		else if (strcmp(k, "secret_file") == 0)
			log_warn("reload: secret_file: a cluster secret is %s only by a restart; "
				 "the running daemon goes on %s", secret_new ? "added" : "removed",
				 secret_old ? "with its secret" : "without one");
		else
			log_warn("reload: '%s' changed in %s, which takes a restart (systemctl "
				 "restart ringd); the running value stays", k,
				 path ? path : "the command line");
	}
	if (access) {
		const char *paths[2] = { oc->socket, what };

		if (oc->control[0] != '\0')
			snprintf(what, sizeof(what), "%s", oc->control);
		else
			snprintf(what, sizeof(what), "%s.ctl", oc->socket);
		memcpy(oc->allow_users, nc.allow_users, sizeof(oc->allow_users));
		oc->n_allow_users = nc.n_allow_users;
		memcpy(oc->allow_groups, nc.allow_groups, sizeof(oc->allow_groups));
		oc->n_allow_groups = nc.n_allow_groups;
		access_commit(paths, 2);
		list_text(oc->allow_users, oc->n_allow_users, a, sizeof(a));
		list_text(oc->allow_groups, oc->n_allow_groups, b, sizeof(b));
		log_info("reload: allow_users = %s, allow_groups = %s (for new clients; those "
			 "attached stay)", a, b);
		applied++;
	}
	if (secret_old && secret_new) {
		r = auth_reload_commit();
		log_info("reload: secret_file %s read: %s (new peer connections prove it; live "
			 "links stay)", nc.secret_file, r == 1 ? "a new secret" : "the same secret");
		applied += r == 1 || strcmp(oc->secret_file, nc.secret_file) != 0;
		snprintf(oc->secret_file, sizeof(oc->secret_file), "%s", nc.secret_file);
	} else {
		auth_reload_abort();
	}
	if (tls_ctx != NULL) {
		bool files = strcmp(oc->tls_cert, nc.tls_cert) || strcmp(oc->tls_key, nc.tls_key) ||
			     strcmp(oc->tls_ca, nc.tls_ca) || oc->tls_ktls != nc.tls_ktls;

		if (tls_reload_commit(tls_ctx, what, sizeof(what)) == 0) {
			log_info("reload: TLS files %s, %s, %s read: %s; new peer connections "
				 "use them, live links stay", nc.tls_cert, nc.tls_key, nc.tls_ca,
				 what);
			snprintf(oc->tls_cert, sizeof(oc->tls_cert), "%s", nc.tls_cert);
			snprintf(oc->tls_key, sizeof(oc->tls_key), "%s", nc.tls_key);
			snprintf(oc->tls_ca, sizeof(oc->tls_ca), "%s", nc.tls_ca);
			oc->tls_ktls = nc.tls_ktls;
			applied += files || strncmp(what, "a new", 5) == 0;
		} else {
			log_warn("reload: TLS is not running: the TLS files were not applied");
		}
	}
#define LIVE_NUMBER(field, key, fmt, cast) \
	if (oc->field != nc.field) { \
		log_info("reload: " key " " fmt " -> " fmt, (cast)oc->field, (cast)nc.field); \
		oc->field = nc.field; \
		applied++; \
	}
	LIVE_NUMBER(op_timeout_ms, "op_timeout_ms (operations from now on)", "%u", unsigned)
	LIVE_NUMBER(max_clients, "max_clients (new clients)", "%d", int)
	LIVE_NUMBER(max_clients_per_user, "max_clients_per_user (new clients)", "%d", int)
	LIVE_NUMBER(hello_timeout_ms, "hello_timeout_ms (new clients)", "%u", unsigned)
	LIVE_NUMBER(max_jobs, "max_jobs (new jobs)", "%d", int)
	LIVE_NUMBER(max_arena_bytes, "max_arena (new clients)", "%llu", unsigned long long)
#undef LIVE_NUMBER
	if (strcmp(oc->hosts, nc.hosts) == 0)
		restart += check_hostfile(rd);
	/* The level last, its line and the summary said at the more verbose of
	 * the old and the new level, so that they show either way. */
	if (oc->log_level != nc.log_level) {
		log_info("reload: log_level %s -> %s", level_name(oc->log_level),
			 level_name(nc.log_level));
		applied++;
	}
	log_info("reload: done: %d setting%s applied, %d need%s a restart", applied,
		 applied == 1 ? "" : "s", restart, restart == 1 ? "s" : "");
	log_set_level(nc.log_level);
	oc->log_level = nc.log_level;
	notify_done(rd);
	return;

refused:
	log_err("reload: %s; nothing was changed, the running configuration stays", err);
	notify_done(rd);
}
