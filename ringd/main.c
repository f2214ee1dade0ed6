/*
 * main.c - ringd's entry point: settings, the hostfile, our place in the ring,
 * signals, and the engine thread's event loop.
 *
 *   ringd --hosts FILE [--rank N] [--listen ADDR:PORT] [--socket PATH]
 *         [--config FILE] [--foreground] [-v] [--KEY VALUE ...]
 *
 * Every key of ringd.conf is also an option (--segment 256K).  The file is read
 * first and the command line overrides it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "coll.h"
#include "../proto/log.h"

static struct ringd the_ringd;

uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t
now_ms(void)
{
	return now_us() / 1000u;
}

const char *
ringd_state_name(enum ring_state s)
{
	static const char *const names[] = { "forming", "ready", "degraded", "stopped" };

	return (unsigned)s < 4 ? names[s] : "?";
}

/* systemd's notify protocol, without linking libsystemd. */
static void
sd_notify_msg(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	int fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@') ||
	    (len = strlen(path)) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
	       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	close(fd);
}

/* The ring is ready when our links are up and a token went all the way round
 * (link_ring_check); a break anywhere (a link here, or a host's report) makes it
 * degraded until a token goes round again. */
void
ringd_update_state(struct ringd *rd)
{
	enum ring_state old = rd->state, st;
	bool up = rd->world == 1 || (rd->next != NULL && rd->prev != NULL &&
				     rd->next->state == LINK_UP && rd->prev->state == LINK_UP);
	char msg[PROTO_TEXT_MAX + 64];

	if (old == RING_STOPPED)
		return;
	if (up && !rd->links_up && rd->world > 1) {
		rd->links_up = true;
		link_ring_check(rd);
	}
	rd->links_up = up;
	if (up && (rd->world == 1 || rd->whole))
		st = RING_READY;
	else if (old == RING_READY || old == RING_DEGRADED)
		st = RING_DEGRADED;
	else
		st = RING_FORMING;
	if (st == old)
		return;
	rd->state = st;
	if (rd->world == 1 && st == RING_READY)
		rd->epoch++;
	log_info("ring: %s -> %s (epoch %u)", ringd_state_name(old), ringd_state_name(st),
		 rd->epoch);
	snprintf(msg, sizeof(msg), "%sSTATUS=ring %s, host %d of %d, epoch %u%s%.200s",
		 st == RING_READY ? "READY=1\n" : "", ringd_state_name(st), rd->rank, rd->world,
		 rd->epoch, rd->ring_error[0] && st != RING_READY ? ": " : "",
		 st != RING_READY ? rd->ring_error : "");
	sd_notify_msg(msg);
	if (st == RING_READY)
		coll_ring_ready(rd);
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: ringd --hosts FILE [--rank N] [--listen ADDR:PORT] [--socket PATH]\n"
		"             [--control PATH] [--config FILE] [--foreground] [-v] [--KEY VALUE]\n"
		"\n"
		"Joins the ring of daemons listed in the hostfile (host:port a line, in ring\n"
		"order; Open MPI and MLX hostfiles are read too) and serves the collectives of\n"
		"local libring clients on the socket.  Every ringd.conf key is an option:\n"
		"--segment SIZE, --window SIZE, --piece SIZE, --heartbeat-ms N,\n"
		"--peer-timeout-ms N, --op-timeout-ms N, --cluster NAME, --log-level LEVEL ...\n"
		"Without --rank, ringd finds itself among this machine's addresses.\n");
}

static void
stop_cb(evutil_socket_t sig, short what, void *arg)
{
	struct ringd *rd = arg;

	(void)what;
	log_info("signal %d: stopping", (int)sig);
	sd_notify_msg("STOPPING=1");
	event_base_loopexit(rd->base, NULL);
}

static void
hup_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	log_info("SIGHUP: nothing to reload yet");
}

static int
parse_args(struct ringd *rd, int argc, char **argv, bool *foreground)
{
	char err[512];
	int i, verbose = 0;

	config_defaults(&rd->cfg);
	/* The file first, so that the command line wins. */
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
			if (config_load(&rd->cfg, argv[i + 1], err, sizeof(err)) != 0) {
				fprintf(stderr, "ringd: %s\n", err);
				return -1;
			}
		}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		char key[64];
		const char *val, *eq;

		if (strcmp(a, "--config") == 0) {
			i++;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(a, "--version") == 0) {
			printf("ringd %s (protocol %d)\n", RING_VERSION_STRING, PROTO_VERSION);
			exit(0);
		}
		if (strcmp(a, "-f") == 0 || strcmp(a, "--foreground") == 0) {
			rd->cfg.foreground = true;
			continue;
		}
		if (strncmp(a, "-v", 2) == 0 && strspn(a + 1, "v") == strlen(a + 1)) {
			verbose += (int)strlen(a + 1);
			continue;
		}
		if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
			fprintf(stderr, "ringd: unexpected argument '%s'\n", a);
			usage(stderr);
			return -1;
		}
		if ((eq = strchr(a + 2, '=')) != NULL) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - a - 2), a + 2);
			val = eq + 1;
		} else {
			if (i + 1 >= argc) {
				fprintf(stderr, "ringd: option %s needs a value\n", a);
				return -1;
			}
			snprintf(key, sizeof(key), "%s", a + 2);
			val = argv[++i];
		}
		if (config_set(&rd->cfg, key, val, err, sizeof(err)) != 0) {
			fprintf(stderr, "ringd: --%s: %s\n", key, err);
			return -1;
		}
	}
	if (verbose > 0)
		rd->cfg.log_level = verbose > 1 ? LOG_LVL_DEBUG : LOG_LVL_INFO + (verbose > 0);
	if (rd->cfg.log_level > LOG_LVL_DEBUG)
		rd->cfg.log_level = LOG_LVL_DEBUG;
	*foreground = rd->cfg.foreground;
	if (rd->cfg.hosts[0] == '\0') {
		fprintf(stderr, "ringd: --hosts FILE is required\n");
		usage(stderr);
		return -1;
	}
	if (rd->cfg.window_bytes < 2 * rd->cfg.segment_bytes + 2 * PROTO_FRAME_HDR) {
		fprintf(stderr, "ringd: window (%u) must hold at least two segments (%u each)\n",
			rd->cfg.window_bytes, rd->cfg.segment_bytes);
		return -1;
	}
	return 0;
}

static void
daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		fatal("fork: %s", strerror(errno));
	if (pid > 0)
		_exit(0);
	setsid();
	if ((fd = open("/dev/null", O_RDWR)) >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		if (fd > 2)
			close(fd);
	}
}

int
main(int argc, char **argv)
{
	struct ringd *rd = &the_ringd;
	char err[512];
	bool fg = false;

	if (parse_args(rd, argc, argv, &fg) != 0)
		return 64;
	log_init("ringd", rd->cfg.log_level, 0);
	if (hostfile_load(&rd->hf, rd->cfg.hosts, HOSTFILE_DEFAULT_PORT, err, sizeof(err)) != 0)
		fatal("hostfile %s: %s", rd->cfg.hosts, err);
	rd->world = rd->hf.n;
	rd->rank = rd->cfg.rank;
	if (rd->rank < 0 && (rd->rank = hostfile_find_self(&rd->hf)) < 0)
		fatal("none of the hosts in %s is this machine (or their ports are taken); "
		      "give --rank", rd->cfg.hosts);
	if (rd->rank >= rd->world)
		fatal("--rank %d but the hostfile lists %d hosts", rd->rank, rd->world);
	/* before detaching, so that a refusal reaches the operator's terminal */
	if (auth_init(rd, err, sizeof(err)) != 0)
		fatal("%s", err);
	if (sess_access_init(&rd->cfg, err, sizeof(err)) != 0)
		fatal("%s", err);
	if (!fg)
		daemonize();
	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads() != 0)
		fatal("libevent has no thread support");
	if ((rd->base = event_base_new()) == NULL)
		fatal("cannot create the event loop");
	rd->started_ms = now_ms();
	rd->client_fd = -1;
	rd->peer_fd = -1;
	rd->state = RING_FORMING;
	coll_init(rd);
	if (sess_start(rd) != 0)
		fatal("cannot open the client socket %s", rd->cfg.socket);
	if (ctl_start(rd) != 0)
		fatal("cannot open the control socket");
	if (link_start(rd) != 0)
		fatal("cannot start the peer links");
	ringd_update_state(rd);
	rd->sig_int = evsignal_new(rd->base, SIGINT, stop_cb, rd);
	rd->sig_term = evsignal_new(rd->base, SIGTERM, stop_cb, rd);
	rd->sig_hup = evsignal_new(rd->base, SIGHUP, hup_cb, rd);
	evsignal_add(rd->sig_int, NULL);
	evsignal_add(rd->sig_term, NULL);
	evsignal_add(rd->sig_hup, NULL);
	log_info("ringd %s: host %d of %d, cluster %s, segment %u, window %u", RING_VERSION_STRING,
		 rd->rank, rd->world, rd->cfg.cluster, rd->cfg.segment_bytes, rd->cfg.window_bytes);
	event_base_dispatch(rd->base);

	rd->state = RING_STOPPED;
	ctl_stop(rd);
	sess_stop(rd);
	link_stop(rd);
	event_free(rd->sig_int);
	event_free(rd->sig_term);
	event_free(rd->sig_hup);
	/* run the deferred frees */
	event_base_loop(rd->base, EVLOOP_NONBLOCK);
	event_base_free(rd->base);
	hostfile_free(&rd->hf);
	auth_fini();
	log_info("stopped");
	return 0;
}
