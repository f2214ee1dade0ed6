/*
 * jobattach.c - a host's processes joining and leaving a job: a process
 * attaches with the job's name, its local rank and size and (from its
 * launcher) its global rank and world, checked against those attached here
 * before it; once the whole local group is here the host claims its ranks
 * (job_claim, job.c).  A process that leaves before the job formed withdraws
 * the claim; one that leaves a formed job tells every host (LEAVE), so the
 * operations it never called fail everywhere at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobrec.h"

static int
job_check_attach(struct ringd *rd, struct job *j, const char *name, int lr, int lsize, int rank,
		 int world, int pid, char *err, size_t errlen)
{
	int i;

	if (lsize < 1 || lsize > PROTO_JOIN_MAX || lr < 0 || lr >= lsize) {
		snprintf(err, errlen,
			 "local rank %d of %d is out of range (1..%d processes "
			 "per host)",
			 lr, lsize, PROTO_JOIN_MAX);
		return RING_EINVAL;
	}
	if (world > PROTO_MAX_RANKS || rank >= world) {
		snprintf(err, errlen, "rank %d does not fit world size %d", rank, world);
		return RING_EINVAL;
	}
	if (j->nloc == 0)
		return 0;
	if (j->local_size != lsize) {
		snprintf(err, errlen,
			 "job %s: this process says %d processes on this host, "
			 "an earlier one said %d",
			 name, lsize, j->local_size);
		return RING_EINVAL;
	}
	if (j->local_world != world) {
		snprintf(err, errlen,
			 "job %s: world size %d disagrees with %d known here "
			 "(with unequal processes per host, give the launcher's RANK and "
			 "WORLD_SIZE; a job of another size needs another RING_JOB name)",
			 name, world, j->local_world);
		if (!job_complete(j)) /* none of it can form: fail all of it */
			job_fail_form(rd, j, true, "%s", err);
		return RING_EINVAL;
	}
	if (j->loc[lr].sess != NULL && j->loc[lr].sess->pid == pid) {
		snprintf(err, errlen,
			 "job %s: this process (pid %d) already holds local rank %d "
			 "(rank %d) through a communicator it opened before: open one per "
			 "process and share it (in Rust, GradientSynchronizer::"
			 "with_communicator takes the open one)",
			 name, (int)pid, lr, j->loc[lr].rank);
		return RING_EINVAL;
	}
	if (j->loc[lr].sess != NULL) {
		snprintf(err, errlen,
			 "job %s: local rank %d (rank %d) is already attached by pid "
			 "%d; this process asked for rank %d (give each process its own "
			 "LOCAL_RANK)",
			 name, lr, j->loc[lr].rank, j->loc[lr].sess->pid, rank);
		return RING_EINVAL;
	}
	for (i = 0; i < j->local_size; i++)
		if (j->loc[i].sess != NULL && j->loc[i].rank == rank) {
			snprintf(err, errlen,
				 "job %s: rank %d is already attached here as local "
				 "rank %d",
				 name, rank, i);
			return RING_EINVAL;
		}
	return 0;
}

int
job_attach(struct ringd *rd, struct client *s, const char *name, int lr, int lsize, int rank,
	   int world, char *err, size_t errlen)
{
	char lobby[PROTO_JOB_MAX + 1];
	uint32_t id;
	struct job *j;
	int rc;

	/* a newcomer of ring_comm_grow waits in its base job's lobby */
	if (s->newcomer) {
		if (!job_grow_newcomer_place(rd, name, lr, lobby, sizeof(lobby), &rank, &world, err,
					     errlen))
			return RING_EINVAL;
		name = lobby;
	}
	id = proto_job_id(name);
	j = job_lookup(rd, id);

	if (j != NULL && j->name[0] != '\0' && strcmp(j->name, name) != 0) {
		snprintf(err, errlen, "job name '%s' collides with job '%s' (id %08x)", name,
			 j->name, id);
		return RING_EINVAL;
	}
	if (j == NULL && (j = job_wire(rd, id)) == NULL) {
		snprintf(err, errlen, "too many jobs on this daemon (max_jobs = %d)",
			 rd->cfg.max_jobs);
		return RING_EPERM;
	}
	snprintf(j->name, sizeof(j->name), "%s", name);
	if (j->error[0] != '\0') {
		if (now_ms() - j->error_ms < FORM_ERROR_MS || j->nloc > 0) {
			snprintf(err, errlen, "job %s cannot form: %s", name, j->error);
			return RING_EINVAL;
		}
		j->error[0] = '\0'; /* an old failure: this is a new start */
	}
	if (world < 0)
		world = rd->world * lsize;
	if (rank < 0)
		rank = rd->rank * lsize + lr;
	if ((rc = job_check_attach(rd, j, name, lr, lsize, rank, world, s->pid, err, errlen)) != 0)
		return rc;
	if (j->nloc == 0) {
		free(j->loc);
		if ((j->loc = calloc((size_t)lsize, sizeof(*j->loc))) == NULL) {
			j->local_size = 0;
			snprintf(err, errlen, "out of memory");
			return RING_ENOMEM;
		}
		j->local_size = lsize;
		j->local_world = world;
	}
	if (j->nloc == 0) {
		j->survivors = s->survivors;
	} else if (j->survivors != s->survivors) {
		snprintf(err, errlen,
			 "job %s: this process %s a survivors' job of "
			 "ring_comm_shrink, the ones attached here before it %s",
			 name, s->survivors ? "joins" : "does not join",
			 j->survivors ? "do" : "do not");
		return RING_EINVAL;
	}
	j->loc[lr] = (struct job_proc){ .sess = s, .rank = rank };
	j->nloc++;
	s->job = j;
	s->rank = rank;
	s->size = world;
	s->local_rank = lr;
	s->local_size = lsize;
	job_claim(rd, j);
	return 0;
}

void
job_detach(struct ringd *rd, struct client *s, struct job *j)
{
	uint64_t last = 0;
	bool member = false;
	int i;

	for (i = 0; i < j->local_size; i++)
		if (j->loc[i].sess == s) {
			member = j->loc[i].member;
			last = j->loc[i].entered;
			j->loc[i] = (struct job_proc){ .sess = NULL };
			j->nloc--;
		}
	if (member && j->joined && !j->formed) {
		/* before the job formed: the others here wait for the next one */
		job_withdraw(rd, j);
	} else if (member && j->joined) {
		j->nmember--;
		j->host[rd->rank].gone = j->nmember == 0 ? HOST_GONE : HOST_LEAVING;
		j->host[rd->rank].gone_seq = last;
		j->ready = false; /* the job cannot go on as it was */
		/* Every host hears that a process of ours left and when: operations it
		 * never called fail at once everywhere instead of timing out. */
		send_membership(rd, j, PROTO_F_LEAVE, last);
		if (j->nmember == 0)
			j->joined = false;
	}
	if (j->nloc == 0)
		j->local_size = 0;
	job_settle(rd, j);
}
