/*
 * reload.c - SIGHUP: read the configuration again and apply what can change
 * under a running ring.
 *
 * The settings are rebuilt exactly as at start-up (config_from_args: defaults,
 * the --config file, then the command line, which still wins), and compared
 * key by key with the running ones (config_diff).  The live column of
 * config.c's key table says what becomes of each changed key.  What only
 * decides new work is applied: the log level, who may attach (allow_users,
 * allow_groups), the TLS files and the cluster secret (for peer connections
 * made from now on; live links keep their session), and the local limits read
 * when a client, job or operation starts.  Every other changed key (hosts,
 * rank, listen, socket, cluster, segment, ...) would break the ring or its
 * agreement with the peers: it is named in a warning and keeps its running
 * value until a restart.  The TLS files and the secret are read again on every
 * SIGHUP even when their paths are the same, since renewing a certificate
 * rewrites the file in place.
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

/* One reload: the settings read again beside the running ones, the keys that
 * differ, and what was prepared before anything is applied. */
struct reload {
	struct ringd *rd;
	const char *path;		/* the --config file, or NULL */
	struct config nc;		/* the settings read again */
	struct config_change ch[RELOAD_KEYS_MAX];	/* the keys that differ */
	int n;				/* how many */
	bool access;			/* allow_users or allow_groups changed */
	bool tls_old, tls_new;		/* TLS configured before, and now */
	bool secret_old, secret_new;	/* a secret file before, and now */
	void *tls_ctx;			/* the TLS context prepared, or NULL */
	int applied, restart;		/* settings applied, and left for a restart */
	char err[512];			/* why the reload is refused */
};

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
	ring_status_text(rd, msg, sizeof(msg));
	ring_notify("READY=1\n%s", msg);
}

/* Whether this reload puts a changed key in force; if not, it takes a restart.
 * TLS and the secret are re-read, but turned on or off only by a restart. */
static bool
is_applied(const struct reload *r, const struct config_change *ch)
{
	switch (ch->live) {
	case CONFIG_LIVE:
	case CONFIG_LIVE_LOG:
	case CONFIG_LIVE_ACCESS:
		return true;
	case CONFIG_LIVE_TLS:
		return r->tls_old && r->tls_new;
	case CONFIG_LIVE_SECRET:
		return r->secret_old && r->secret_new;
	case CONFIG_RESTART:
		break;
	}
	return false;
}

/* Copies the changed keys of one class into the running settings; how many. */
static int
take(struct reload *r, enum config_live live)
{
	int n = 0;

	for (int i = 0; i < r->n; i++) {
		if (r->ch[i].live == live) {
			config_copy_key(&r->rd->cfg, &r->nc, r->ch[i].name);
			n++;
		}
	}
	return n;
}

/* Reads and checks everything a reload would apply, changing nothing: 0, or
 * -1 with the reason in r->err. */
static int
prepare(struct reload *r)
{
	const struct config *oc = &r->rd->cfg;
	bool usage;

	if (config_from_args(&r->nc, r->rd->argc, r->rd->argv, &usage, r->err,
			     sizeof(r->err)) != 0)
		return -1;
	r->n = config_diff(oc, &r->nc, r->ch, RELOAD_KEYS_MAX);
	if (r->n > RELOAD_KEYS_MAX)
		r->n = RELOAD_KEYS_MAX;
	for (int i = 0; i < r->n; i++)
		if (r->ch[i].live == CONFIG_LIVE_ACCESS)
			r->access = true;
	if (r->access && access_prepare(&r->nc, r->err, sizeof(r->err)) != 0)
		return -1;
	if (auth_reload_prepare(&r->nc, r->err, sizeof(r->err)) != 0)
		return -1;
	r->tls_old = oc->tls_cert[0] != '\0';
	r->tls_new = r->nc.tls_cert[0] != '\0';
	r->secret_old = oc->secret_file[0] != '\0';
	r->secret_new = r->nc.secret_file[0] != '\0';
	if (r->tls_old && r->tls_new) {
		r->tls_ctx = tls_reload_prepare(r->rd, &r->nc, r->err, sizeof(r->err));
		if (r->tls_ctx == NULL) {
			auth_reload_abort();
			return -1;
		}
	}
	return 0;
}

/* One warning for each changed key that takes a restart. */
static void
warn_restart(struct reload *r)
{
	for (int i = 0; i < r->n; i++) {
		const struct config_change *ch = &r->ch[i];

		if (is_applied(r, ch))
			continue;
		r->restart++;
		if (ch->live == CONFIG_LIVE_TLS && r->tls_old != r->tls_new)
			log_warn("reload: %s: TLS on peer links is turned %s only by a restart; "
				 "peers stay on %s", ch->name, r->tls_new ? "on" : "off",
				 r->tls_old ? "TLS" : "plain TCP");
		else if (ch->live == CONFIG_LIVE_SECRET)
			log_warn("reload: secret_file: a cluster secret is %s only by a restart; "
				 "the running daemon goes on %s",
				 r->secret_new ? "added" : "removed",
				 r->secret_old ? "with its secret" : "without one");
		else
			log_warn("reload: '%s' changed in %s, which takes a restart (systemctl "
				 "restart ringd); the running value stays", ch->name,
				 r->path ? r->path : "the command line");
	}
}

/* allow_users and allow_groups, which count as one setting: who may attach. */
static void
apply_access(struct reload *r)
{
	struct config *oc = &r->rd->cfg;
	char ctl[CONFIG_PATH_MAX + 8], users[600], groups[600];
	const char *paths[2] = { oc->socket, ctl };

	if (!r->access)
		return;
	if (oc->control[0] != '\0')
		snprintf(ctl, sizeof(ctl), "%s", oc->control);
	else
		snprintf(ctl, sizeof(ctl), "%s.ctl", oc->socket);
	take(r, CONFIG_LIVE_ACCESS);
	access_commit(paths, 2);
	config_key_text(oc, "allow_users", users, sizeof(users));
	config_key_text(oc, "allow_groups", groups, sizeof(groups));
	log_info("reload: allow_users = %s, allow_groups = %s (for new clients; those "
		 "attached stay)", users[0] ? users : "(none)", groups[0] ? groups : "(none)");
	r->applied++;
}

/* The secret, read again: applied when it or its path is new. */
static void
apply_secret(struct reload *r)
{
	int secret;

	if (!r->secret_old || !r->secret_new) {
		auth_reload_abort();
		return;
	}
	secret = auth_reload_commit();
	log_info("reload: secret_file %s read: %s (new peer connections prove it; live "
		 "links stay)", r->nc.secret_file,
		 secret == 1 ? "a new secret" : "the same secret");
	if (take(r, CONFIG_LIVE_SECRET) > 0 || secret == 1)
		r->applied++;
}

/* The TLS files, read again: applied when their paths, tls_ktls or the
 * certificate are new. */
static void
apply_tls(struct reload *r)
{
	char what[512];
	int cert;

	if (r->tls_ctx == NULL)
		return;
	cert = tls_reload_commit(r->tls_ctx, what, sizeof(what));
	if (cert < 0) {
		log_warn("reload: TLS is not running: the TLS files were not applied");
		return;
	}
	log_info("reload: TLS files %s, %s, %s read: %s; new peer connections use them, "
		 "live links stay", r->nc.tls_cert, r->nc.tls_key, r->nc.tls_ca, what);
	if (take(r, CONFIG_LIVE_TLS) > 0 || cert == 1)
		r->applied++;
}

/* The limits read when new work starts: each in force for the work its scope
 * names, in the table's order. */
static void
apply_values(struct reload *r)
{
	char was[64], now[64];

	for (int i = 0; i < r->n; i++) {
		const struct config_change *ch = &r->ch[i];

		if (ch->live != CONFIG_LIVE)
			continue;
		config_key_text(&r->rd->cfg, ch->name, was, sizeof(was));
		config_key_text(&r->nc, ch->name, now, sizeof(now));
		log_info("reload: %s (%s) %s -> %s", ch->name, ch->scope, was, now);
		config_copy_key(&r->rd->cfg, &r->nc, ch->name);
		r->applied++;
	}
}

/* Puts in force what prepare checked, warns for what takes a restart, and
 * sums up. */
static void
apply(struct reload *r)
{
	struct config *oc = &r->rd->cfg;
	int level = r->nc.log_level;
	char was[16], now[16];

	/* a more verbose level at once, so that this reload's own lines show */
	if (level > oc->log_level)
		log_set_level(level);
	warn_restart(r);
	apply_access(r);
	apply_secret(r);
	apply_tls(r);
	apply_values(r);
	if (strcmp(oc->hosts, r->nc.hosts) == 0)
		r->restart += check_hostfile(r->rd);
	/* The level last, its line and the summary said at the more verbose of
	 * the old and the new level, so that they show either way. */
	config_key_text(oc, "log_level", was, sizeof(was));
	if (take(r, CONFIG_LIVE_LOG) > 0) {
		config_key_text(oc, "log_level", now, sizeof(now));
		log_info("reload: log_level %s -> %s", was, now);
		r->applied++;
	}
	log_info("reload: done: %d setting%s applied, %d need%s a restart", r->applied,
		 r->applied == 1 ? "" : "s", r->restart, r->restart == 1 ? "s" : "");
	log_set_level(level);
}

void
reload_run(struct ringd *rd)
{
	struct reload r = { .rd = rd, .path = config_file(rd) };

	log_info("SIGHUP: reloading %s", r.path ? r.path : "(no --config file: the TLS and "
		 "secret files only)");
	if (rd->sd_ready)
		ring_notify("RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading %s",
			     now_us(), r.path ? r.path : "the configuration");
	if (prepare(&r) == 0)
		apply(&r);
	else
		log_err("reload: %s; nothing was changed, the running configuration stays",
			r.err);
	notify_done(rd);
}
