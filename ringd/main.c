/*
 * main.c - ringd's entry point: settings, the hostfile, our place in the ring,
 * signals, and the engine thread's event loop.
 *
 *   ringd --hosts FILE [--rank N] [--listen ADDR:PORT] [--socket PATH]
 *         [--config FILE] [--foreground] [-v] [--KEY VALUE ...]
 *
 * Every key of ringd.conf is also an option (--segment 256K).  The file is read
 * first and the command line overrides it.
 *
 * Under systemd (Type=notify) the daemon speaks the notify protocol itself,
 * without libsystemd: READY=1 once the ring is ready (not when the process is
 * merely up), STATUS= on every ring state change, RELOADING=1 and READY=1
 * around a SIGHUP reload, STOPPING=1 on SIGTERM/SIGINT, and WATCHDOG=1 from a
 * timer of the engine thread's event loop, so a loop that is stuck stops the
 * pings and systemd restarts the daemon.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "engine.h"
#include "loop.h"
#include "pool.h"
#include "../proto/log.h"

static struct ringd the_ringd;

/* What the ring floor reports, to the engine's handlers. */
static const struct ring_events engine_events = {
	.frame = engine_frame,
	.place = engine_place,
	.link_down = fail_link_down,
	.direct_down = fail_direct_down,
	.ready = fail_ring_ready,
	.room = exec_pump,
};

/* What the loop asks of the engine and the front. */
static const struct loop_hooks loop_hooks = {
	.turn = engine_turn,
	.busy = engine_busy,
	.look = sess_look,
	.looking = sess_looking,
};

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
		"Without --rank, ringd finds itself among this machine's addresses.\n"
		"SIGHUP reloads what can change under a running ring, SIGTERM stops.\n"
		"See ringd(8).\n");
}

static void
stop_cb(evutil_socket_t sig, short what, void *arg)
{
	struct ringd *rd = arg;

	(void)what;
	log_info("signal %d (%s): stopping", (int)sig, strsignal((int)sig));
	/* before the links close: systemd then reads what follows as a stop,
	 * not as the ring breaking */
	ring_notify("STOPPING=1\nSTATUS=stopping (%s)", strsignal((int)sig));
	event_base_loopexit(rd->base, NULL);
}

static void
hup_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	reload_run(arg);
}

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	ring_notify("WATCHDOG=1");
}

/*
 * systemd's watchdog (WatchdogSec=): WATCHDOG_USEC is the interval; pings go
 * at half of it from a timer of the engine loop.  WATCHDOG_PID, when set, must
 * be ours: the variables may have been inherited from a parent they were for.
 */
static void
watchdog_start(struct ringd *rd)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	struct timeval tv;
	char *end;
	unsigned long long v;

	if (us == NULL || getenv("NOTIFY_SOCKET") == NULL)
		return;
	if (pid != NULL) {
		errno = 0;
		v = strtoull(pid, &end, 10);
		if (errno != 0 || *end != '\0' || v != (unsigned long long)getpid())
			return;
	}
	errno = 0;
	v = strtoull(us, &end, 10);
	if (errno != 0 || *end != '\0' || end == us || v == 0) {
		log_warn("WATCHDOG_USEC=%.32s is not a number of microseconds: no watchdog pings",
			 us);
		return;
	}
	v /= 2;
	tv.tv_sec = (time_t)(v / 1000000u);
	tv.tv_usec = (suseconds_t)(v % 1000000u);
	rd->watchdog_ev = event_new(rd->base, -1, EV_PERSIST, watchdog_cb, rd);
	if (rd->watchdog_ev == NULL || event_add(rd->watchdog_ev, &tv) != 0)
		fatal("cannot start the systemd watchdog timer");
	log_info("systemd watchdog: a ping every %llu ms", v / 1000u);
	ring_notify("WATCHDOG=1");
}

static int
parse_args(struct ringd *rd, int argc, char **argv, bool *foreground)
{
	char err[512];
	bool usage_err;
	int rc;

	rc = config_from_args(&rd->cfg, argc, argv, &usage_err, err, sizeof(err));
	if (rc == CONFIG_ARGS_HELP) {
		usage(stdout);
		exit(0);
	}
	if (rc == CONFIG_ARGS_VERSION) {
		printf("ringd %s (protocol %d)\n", RING_VERSION_STRING, PROTO_VERSION);
		exit(0);
	}
	if (rc != 0) {
		fprintf(stderr, "ringd: %s\n", err);
		if (usage_err)
			usage(stderr);
		return -1;
	}
	rd->argc = argc;
	rd->argv = argv;
	*foreground = rd->cfg.foreground;
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

/* Our place in the hostfile: --rank, else the entry we advertise, else the
 * first entry that is an address of ours.  An advertised address must be our
 * entry: peers connect to the hostfile's, and that is what they are told. */
static void
setup_rank(struct ringd *rd)
{
	char host[CONFIG_PATH_MAX];
	int port, at = -1;

	if (rd->cfg.advertise[0] != '\0') {
		if (config_split_hostport(rd->cfg.advertise, host, sizeof(host), &port, NULL, 0) !=
		    0)
			fatal_config("advertise = %s: expected HOST:PORT", rd->cfg.advertise);
		at = hostfile_find_entry(&rd->hf, host, port);
		if (at < 0)
			fatal_config(
			    "advertise = %s is none of the hosts in %s: peers connect to "
			    "the hostfile's addresses, so advertise this host's line there",
			    rd->cfg.advertise, rd->cfg.hosts);
	}
	rd->rank = rd->cfg.rank >= 0 ? rd->cfg.rank : at;
	if (rd->rank < 0 && (rd->rank = hostfile_find_self(&rd->hf)) < 0)
		fatal_config("none of the hosts in %s is this machine (or their ports are taken); "
			     "give --rank, or behind NAT or in a container --advertise HOST:PORT "
			     "(this host's line) with --listen ADDR:PORT (what to bind)",
			     rd->cfg.hosts);
	if (rd->rank >= rd->world)
		fatal_config("--rank %d but the hostfile lists %d hosts", rd->rank, rd->world);
	if (at >= 0 && at != rd->rank)
		fatal_config("advertise = %s is the hostfile's host %d, but this is rank %d",
			     rd->cfg.advertise, at, rd->rank);
}

/* The hostfile, our place in it, and what must be refused before the
 * daemon detaches (so the refusal reaches the operator's terminal). */
static void
setup_config(struct ringd *rd)
{
	char err[512];

	if (hostfile_load(&rd->hf, rd->cfg.hosts, HOSTFILE_DEFAULT_PORT, err, sizeof(err)) != 0)
		fatal_config("hostfile %s", err); /* err starts with the path */
	rd->world = rd->hf.n;
	setup_rank(rd);
	if (auth_init(rd, err, sizeof(err)) != 0)
		fatal_config("%s", err);
	if (access_init(&rd->cfg, err, sizeof(err)) != 0)
		fatal_config("%s", err);
}

/* The loop, the threads, the sockets, the ring and the signals. */
static void
setup_daemon(struct ringd *rd)
{
	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads() != 0)
		fatal("libevent has no thread support");
	if ((rd->base = event_base_new()) == NULL)
		fatal("cannot create the event loop");
	/* 0 stays in the settings (a reload compares them), the count goes to
	 * the pool */
	if (pool_start(rd->cfg.threads > 0 ? rd->cfg.threads : pool_threads_auto()) != 0)
		fatal("cannot start the data path's threads");
	rd->started_ms = now_ms();
	rd->client_fd = -1;
	rd->peer_fd = -1;
	rd->state = RING_FORMING;
	loop_init(rd);
	coll_init(rd);
	if (sess_start(rd) != 0)
		fatal("cannot open the client socket %s", rd->cfg.socket);
	if (ctl_start(rd) != 0)
		fatal("cannot open the control socket");
	if (ring_start(rd, &engine_events) != 0)
		fatal("cannot start the peer links");
	ring_update_state(rd);
	if (rd->state != RING_READY) {
		char msg[PROTO_TEXT_MAX + 64];

		ring_status_text(rd, msg, sizeof(msg));
		ring_notify("%s", msg);
	}
	watchdog_start(rd);
	rd->sig_int = evsignal_new(rd->base, SIGINT, stop_cb, rd);
	rd->sig_term = evsignal_new(rd->base, SIGTERM, stop_cb, rd);
	rd->sig_hup = evsignal_new(rd->base, SIGHUP, hup_cb, rd);
	evsignal_add(rd->sig_int, NULL);
	evsignal_add(rd->sig_term, NULL);
	evsignal_add(rd->sig_hup, NULL);
}

/* After the loop: everything stopped and freed, in the order it depends. */
static void
teardown(struct ringd *rd)
{
	rd->state = RING_STOPPED;
	ctl_stop(rd);
	sess_stop(rd);
	/* link_stop frees the peer port's event, which may be resting */
	listener_forget(rd->peer_ev);
	ring_stop(rd);
	free(rd->direct_vain);
	rd->direct_vain = NULL;
	event_free(rd->sig_int);
	event_free(rd->sig_term);
	event_free(rd->sig_hup);
	if (rd->watchdog_ev != NULL)
		event_free(rd->watchdog_ev);
	/* run the deferred frees, and what they ask of the engine */
	event_base_loop(rd->base, EVLOOP_NONBLOCK);
	engine_turn(rd);
	pool_stop(); /* the links on its loops are closed */
	event_base_free(rd->base);
	hostfile_free(&rd->hf);
	auth_fini();
}

int
main(int argc, char **argv)
{
	struct ringd *rd = &the_ringd;
	bool fg = false;

	if (parse_args(rd, argc, argv, &fg) != 0)
		return LOG_EXIT_CONFIG;
	log_init("ringd", rd->cfg.log_level, 0);
	setup_config(rd);
	if (!fg)
		daemonize();
	setup_daemon(rd);
	log_info("ringd %s: host %d of %d, cluster %s, segment %u, window %u, streams %d, "
		 "threads %d",
		 RING_VERSION_STRING, rd->rank, rd->world, rd->cfg.cluster, rd->cfg.segment_bytes,
		 rd->cfg.window_bytes, rd->cfg.streams > 0 ? rd->cfg.streams : pool_threads(),
		 pool_threads());
	loop_run(rd, &loop_hooks);
	teardown(rd);
	log_info("stopped");
	return 0;
}
