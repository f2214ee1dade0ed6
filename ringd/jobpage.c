/*
 * jobpage.c - the job pages (proto.h, "The job page"): for a job whose ranks
 * are all on this host, with several of them here, one sealed memfd per
 * formation, which its processes share to run small all-reduces and
 * barriers among themselves (libring/fast.c).  The table of the pages alive
 * is this room's: a page is made at the first WELCOME of a formation, found
 * by the job's name, id and generation at the others, and freed when the
 * last of its sessions lets go.  The daemon writes only the header: its
 * layout at the start, and a break (a process went away, the formation was
 * revoked) with its reason, after which it wakes every process asleep on
 * the page.  It reads nothing the processes write there.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/syscall.h>

#include "jobpage.h"
#include "../proto/log.h"
#include "../proto/proto.h"

_Static_assert(sizeof(struct proto_page) <= PROTO_PAGE_HDR, "the page's header outgrew its room");

struct jpage {
	char name[PROTO_JOB_MAX + 1]; /* the job's */
	uint32_t id, gen;             /* its id, and its formation's generation */
	int nranks;                   /* its processes here */
	int fd;                       /* the sealed memfd */
	struct proto_page *page;      /* our mapping of it */
	size_t bytes;                 /* its size */
	int refs;                     /* sessions that hold it */
	TAILQ_ENTRY(jpage) entry;
};

static TAILQ_HEAD(, jpage) jobpages = TAILQ_HEAD_INITIALIZER(jobpages);

/* A new page for nranks processes, its header written and sealed; NULL
 * (logged) when the system refuses. */
static struct jpage *
jobpage_make(const char *name, uint32_t id, uint32_t gen, int nranks)
{
	size_t bytes = proto_page_bytes((unsigned)nranks);
	struct jpage *p;
	void *base;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->fd = memfd_create("ringd-job", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (p->fd < 0 || ftruncate(p->fd, (off_t)bytes) != 0 ||
	    fcntl(p->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
	    (base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0)) ==
		MAP_FAILED) {
		log_warn("job %s: no job page (%s): its processes take the daemon's path", name,
			 strerror(errno));
		if (p->fd >= 0)
			close(p->fd);
		free(p);
		return NULL;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->id = id;
	p->gen = gen;
	p->nranks = nranks;
	p->page = base;
	p->bytes = bytes;
	p->page->nranks = (uint32_t)nranks;
	p->page->slot_bytes = PROTO_PAGE_SLOT_BYTES;
	p->page->nrecs = PROTO_PAGE_RECS;
	p->page->job_id = id;
	p->page->gen = gen;
	__atomic_store_n(&p->page->magic, PROTO_PAGE_MAGIC, __ATOMIC_RELEASE);
	TAILQ_INSERT_TAIL(&jobpages, p, entry);
	log_debug("job %s (generation %u): a job page of %zu bytes for %d processes", name, gen,
		  bytes, nranks);
	return p;
}

struct jpage *
jobpage_get(const char *name, uint32_t id, uint32_t gen, int nranks)
{
	struct jpage *p;

	if (nranks < 2 || nranks > (int)PROTO_PAGE_RANKS_MAX)
		return NULL;
	TAILQ_FOREACH(p, &jobpages, entry)
		if (p->id == id && p->gen == gen && strcmp(p->name, name) == 0)
			break;
	if (p != NULL && p->nranks != nranks)
		return NULL; /* the engine said otherwise before: no page rather than two */
	if (p == NULL && (p = jobpage_make(name, id, gen, nranks)) == NULL)
		return NULL;
	p->refs++;
	return p;
}

int
jobpage_fd(const struct jpage *p)
{
	return p->fd;
}

void
jobpage_break(struct jpage *p, int code, const char *why)
{
	struct proto_page *h = p->page;

	if (__atomic_load_n(&h->broken, __ATOMIC_ACQUIRE) == 0) {
		/* the reason first: a process that sees the code reads it whole */
		snprintf(h->reason, sizeof(h->reason), "%s", why);
		__atomic_store_n(&h->broken, code, __ATOMIC_RELEASE);
	}
	__atomic_add_fetch(&h->futex, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &h->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void
jobpage_put(struct jpage *p)
{
	if (p == NULL || --p->refs > 0)
		return;
	TAILQ_REMOVE(&jobpages, p, entry);
	munmap(p->page, p->bytes);
	close(p->fd);
	free(p);
}
