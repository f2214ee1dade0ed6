/*
 * access.c - who may use this daemon: root, the daemon's own user, the users
 * of allow_users and the members of allow_groups (primary or supplementary),
 * checked on every client and control connection with the caller's
 * credentials (SO_PEERCRED).  The lists are resolved at start-up and again by a
 * reload, which prepares them aside and swaps them in whole; the control
 * thread checks callers too, so they are read and replaced under a lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>

#include "ringd.h"
#include "../proto/log.h"

/* allow_users / allow_groups as ids; a check copies them out of the lock and
 * works on its copy. */
struct access_list {
	uid_t self;			/* the daemon's own user */
	uid_t uids[CONFIG_LIST_MAX];
	int nuids;
	gid_t gids[CONFIG_LIST_MAX];
	int ngids;
};

static struct access_list access_list;		/* in force */
static struct access_list access_pending;	/* resolved by a reload, not yet in force */
static pthread_mutex_t access_lock = PTHREAD_MUTEX_INITIALIZER;

/* A number, or a name the system knows; -1 with a reason in err. */
static int
resolve_id(const char *key, const char *s, bool group, unsigned int *id, char *err,
	   size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s != '\0' && *end == '\0' && errno == 0 && v < 0xffffffffUL) {
		*id = (unsigned int)v;
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(s);

		if (g != NULL) {
			*id = g->gr_gid;
			return 0;
		}
	} else {
		struct passwd *pw = getpwnam(s);

		if (pw != NULL) {
			*id = pw->pw_uid;
			return 0;
		}
	}
	snprintf(err, errlen, "%s: no %s named '%s' on this system", key,
		 group ? "group" : "user", s);
	return -1;
}

static int
access_resolve(const struct config *cfg, struct access_list *al, char *err, size_t errlen)
{
	unsigned int id;
	int i;

	memset(al, 0, sizeof(*al));
	al->self = geteuid();
	for (i = 0; i < cfg->n_allow_users; i++) {
		if (resolve_id("allow_users", cfg->allow_users[i], false, &id, err, errlen) != 0)
			return -1;
		al->uids[al->nuids++] = (uid_t)id;
	}
	for (i = 0; i < cfg->n_allow_groups; i++) {
		if (resolve_id("allow_groups", cfg->allow_groups[i], true, &id, err, errlen) != 0)
			return -1;
		al->gids[al->ngids++] = (gid_t)id;
	}
	return 0;
}

int
access_init(const struct config *cfg, char *err, size_t errlen)
{
	struct access_list al;

	if (access_resolve(cfg, &al, err, errlen) != 0)
		return -1;
	pthread_mutex_lock(&access_lock);
	access_list = al;
	pthread_mutex_unlock(&access_lock);
	return 0;
}

int
access_prepare(const struct config *cfg, char *err, size_t errlen)
{
	return access_resolve(cfg, &access_pending, err, errlen);
}

void
access_commit(const char *const paths[], int npaths)
{
	int i;

	pthread_mutex_lock(&access_lock);
	access_list = access_pending;
	pthread_mutex_unlock(&access_lock);
	for (i = 0; i < npaths; i++)
		access_socket_group(paths[i]);
}

static bool
gid_allowed(const struct access_list *al, gid_t g)
{
	int i;

	for (i = 0; i < al->ngids; i++)
		if (al->gids[i] == g)
			return true;
	return false;
}

/* The caller's supplementary groups (SO_PEERGROUPS, Linux 4.13). */
static bool
peer_groups_allowed(const struct access_list *al, int fd)
{
	gid_t small[256], *g = small;
	socklen_t len = sizeof(small);
	bool ok = false;
	size_t i;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
		if (errno != ERANGE || (g = malloc(len)) == NULL ||
		    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
			if (g != small)
				free(g);
			return false;
		}
	}
	for (i = 0; i < len / sizeof(gid_t) && !ok; i++)
		ok = gid_allowed(al, g[i]);
	if (g != small)
		free(g);
	return ok;
}

int
access_peer_allowed(int fd, uid_t *uid, char *why, size_t len)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct passwd pw, *res = NULL;
	char pwbuf[1024], name[64];
	struct access_list al;
	int i;

	pthread_mutex_lock(&access_lock);
	al = access_list;
	pthread_mutex_unlock(&access_lock);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
		snprintf(why, len, "cannot read the caller's credentials: %s", strerror(errno));
		return -1;
	}
	*uid = cred.uid;
	if (cred.uid == 0 || cred.uid == al.self)
		return 0;
	for (i = 0; i < al.nuids; i++)
		if (al.uids[i] == cred.uid)
			return 0;
	if (al.ngids > 0 && (gid_allowed(&al, cred.gid) || peer_groups_allowed(&al, fd)))
		return 0;
	if (getpwuid_r(cred.uid, &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res != NULL)
		snprintf(name, sizeof(name), "%.40s", pw.pw_name);
	else
		snprintf(name, sizeof(name), "-");
	snprintf(why, len, "user %s (uid %u, pid %d) is not allowed to use this ringd: "
		 "list it in allow_users, or a group of it in allow_groups (ringd.conf)",
		 name, (unsigned int)cred.uid, (int)cred.pid);
	return -1;
}

/* The sockets' group is the first of allow_groups: mode 0660 lets the group
 * reach them, and SO_PEERCRED then decides. */
void
access_socket_group(const char *path)
{
	gid_t g;
	int n;

	pthread_mutex_lock(&access_lock);
	n = access_list.ngids;
	g = n > 0 ? access_list.gids[0] : (gid_t)-1;
	pthread_mutex_unlock(&access_lock);
	if (n > 0 && chown(path, (uid_t)-1, g) != 0)
		log_warn("cannot give %s to group %u (allow_groups): %s", path,
			 (unsigned int)g, strerror(errno));
}
