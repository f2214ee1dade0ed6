/*
 * hop-latency.c - what one message hop costs on this machine, the floor under
 * ringd's small-message latency.  Two processes ping-pong 8 bytes, 20000 times,
 * over a Unix SOCK_SEQPACKET pair (libring to ringd) and over TCP on loopback
 * (ringd to ringd), each side either sleeping in epoll_wait until the message
 * arrives (as ringd and libring do) or spinning on non-blocking reads (as Open
 * MPI's TCP transport does).  It prints the one-way time of each: half the
 * median round trip.
 *
 * A through-daemon all-reduce of 8 bytes on 2 hosts has 4 hops on its critical
 * path (client -> daemon, two ring steps daemon -> daemon, daemon -> client);
 * Open MPI's has 2 (one exchange each way between the two ranks), spinning.
 *
 *   build/bin/hop-latency [ROUNDS]
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Waits for one 8-byte message on fd: asleep in epoll_wait, or spinning. */
static int recv_one(int fd, int ep, bool spin)
{
	char buf[8];
	ssize_t n;

	for (;;) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == (ssize_t)sizeof(buf))
			return 0;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return -1;
		if (!spin) {
			struct epoll_event ev;

			if (epoll_wait(ep, &ev, 1, 5000) <= 0)
				return -1;
		}
	}
}

static int send_one(int fd)
{
	char buf[8] = { 0 };

	return send(fd, buf, sizeof(buf), MSG_NOSIGNAL) == (ssize_t)sizeof(buf) ? 0 : -1;
}

static int make_epoll(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	int ep = epoll_create1(0);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		return -1;
	return ep;
}

/* Median one-way time in microseconds, or -1. */
static double pingpong(int a, int b, int rounds, bool spin)
{
	double *rt = calloc((size_t)rounds, sizeof(double)), med;
	pid_t pid = fork();
	int ep, i, st;

	if (!rt || pid < 0)
		return -1;
	if (pid == 0) {
		close(a);
		ep = make_epoll(b);
		for (i = 0; i < rounds + 100; i++)
			if (recv_one(b, ep, spin) || send_one(b))
				_exit(1);
		_exit(0);
	}
	ep = make_epoll(a);
	for (i = 0; i < rounds + 100; i++) {
		double t0 = now_us();

		if (send_one(a) || recv_one(a, ep, spin)) {
			free(rt);
			return -1;
		}
		if (i >= 100)
			rt[i - 100] = now_us() - t0;
	}
	waitpid(pid, &st, 0);
	close(ep);
	qsort(rt, (size_t)rounds, sizeof(double), cmp_double);
	med = rt[rounds / 2] / 2;
	free(rt);
	return med;
}

static int tcp_pair(int fds[2])
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sa, &sl))
		return -1;
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&sa, sizeof(sa)))
		return -1;
	fds[1] = accept(l, NULL, NULL);
	close(l);
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fds[1] < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20000, fds[2];

	if (rounds < 1) {
		fprintf(stderr, "usage: hop-latency [ROUNDS]\n");
		return 2;
	}
	printf("one-way 8-byte hop, median of %d round trips / 2 (us)\n", rounds);
	printf("%-28s %10s %10s\n", "transport", "epoll", "spinning");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds))
		return 1;
	printf("%-28s %10.1f %10.1f\n", "unix seqpacket (client)", pingpong(fds[0], fds[1], rounds, false),
	       pingpong(fds[0], fds[1], rounds, true));
	close(fds[0]);
	close(fds[1]);
	if (tcp_pair(fds))
		return 1;
	printf("%-28s %10.1f %10.1f\n", "tcp loopback (ring link)", pingpong(fds[0], fds[1], rounds, false),
	       pingpong(fds[0], fds[1], rounds, true));
	return 0;
}
