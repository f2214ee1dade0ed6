/*
 * writev_linger.c - a writev(2) that lingers, preloaded into the daemons of
 * tests/it_streams.c (LD_PRELOAD): each large write returns only after
 * WRITEV_LINGER_US more microseconds, as a thread descheduled at the end of
 * its system call does (worker threads only: the main thread, a ringd's
 * engine, writes as it is), and it checks that the bytes it wrote did not
 * change in between.  A change means another thread wrote memory that a write in
 * progress was taking (the ThreadSanitizer report of issue 37: the engine
 * placing a segment into an arena while a worker's writev of the same bytes
 * had not returned); it is appended to WRITEV_LINGER_LOG, one line each, and
 * a line "lingered PID N" there counts the writes checked, now and then.
 * Built without any sanitizer, loaded into any build's ringd.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define LINGER_MIN (64u << 10) /* smaller writes go as they are */

static void
note(const char *line)
{
	const char *path = getenv("WRITEV_LINGER_LOG");
	int fd;

	if (path == NULL || (fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600)) < 0)
		return;
	if (write(fd, line, strlen(line)) < 0)
		(void)0;
	close(fd);
}

/* Bytes of iov[i] among the first n written, once done went before it. */
static size_t
taken(const struct iovec *iov, int i, size_t n, size_t done)
{
	return iov[i].iov_len < n - done ? iov[i].iov_len : n - done;
}

ssize_t
writev(int fd, const struct iovec *iov, int iovcnt)
{
	static ssize_t (*real)(int, const struct iovec *, int);
	static unsigned long checked;
	const char *us = getenv("WRITEV_LINGER_US");
	size_t total = 0, off = 0, done = 0;
	unsigned char *copy;
	char line[160];
	ssize_t n;
	int i;

	if (real == NULL)
		real = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	/* a daemon's worker threads linger, its engine (main) thread does not */
	if (us == NULL || total < LINGER_MIN || gettid() == getpid() ||
	    (copy = malloc(total)) == NULL)
		return real(fd, iov, iovcnt);
	for (i = 0; i < iovcnt; i++) {
		memcpy(copy + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	n = real(fd, iov, iovcnt);
	if (n <= 0) {
		free(copy);
		return n;
	}
	usleep((useconds_t)atoi(us));
	for (i = 0, off = 0; i < iovcnt && done < (size_t)n; i++) {
		size_t k = taken(iov, i, (size_t)n, done);

		if (memcmp(copy + off, iov[i].iov_base, k) != 0) {
			snprintf(line, sizeof(line),
				 "changed: pid %d: %zu bytes at %p written by writev(%d) "
				 "changed before it returned\n",
				 (int)getpid(), k, iov[i].iov_base, fd);
			note(line);
		}
		off += iov[i].iov_len;
		done += k;
	}
	/* how many were checked, now and then */
	if (__atomic_add_fetch(&checked, 1, __ATOMIC_RELAXED) % 16 == 1) {
		snprintf(line, sizeof(line), "lingered %d %lu\n", (int)getpid(),
			 __atomic_load_n(&checked, __ATOMIC_RELAXED));
		note(line);
	}
	free(copy);
	return n;
}
