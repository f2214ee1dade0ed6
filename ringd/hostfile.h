/*
 * hostfile.h - the ring's membership, in ring order.  Three formats are read:
 * ringd's own ("host:port" a line, '#' comments, IPv6 as "[addr]:port"), Open
 * MPI's ("host slots=N ...", port from the default), and MLX's JSON hostfile
 * (a list of {"ssh": host, "ips": [addr, ...]} objects, or a list of "host:port"
 * strings).  The format is detected from the content.
 */
#ifndef RINGD_HOSTFILE_H
#define RINGD_HOSTFILE_H

#include <stddef.h>

#define HOSTFILE_MAX_HOSTS 4096
#define HOSTFILE_HOST_MAX 255
#define HOSTFILE_DEFAULT_PORT 18515

struct host_entry {
	char host[HOSTFILE_HOST_MAX + 1];	/* name or address, no brackets */
	int port;			/* 1..65535 */
	int slots;			/* processes per host (Open MPI slots), 0 if unknown */
};

struct hostfile {
	struct host_entry *hosts;	/* in ring order */
	int n;				/* number of hosts */
};

/* Parses text (len bytes, need not be NUL-terminated); default_port fills entries
 * that name none.  Returns 0 or -1 with "line N: reason" in err. */
int hostfile_parse(struct hostfile *hf, const char *text, size_t len, int default_port,
		   char *err, size_t errlen);
/* Reads and parses a file. */
int hostfile_load(struct hostfile *hf, const char *path, int default_port,
		  char *err, size_t errlen);
void hostfile_free(struct hostfile *hf);
/* The rank whose address is one of this machine's own and whose port is free to
 * bind (so several daemons on one machine each find their own), or -1. */
int hostfile_find_self(const struct hostfile *hf);
/* The entry a host advertises (advertise = HOST:PORT): the first whose host
 * is the same name or resolves to the same address, with the same port; -1
 * when none is. */
int hostfile_find_entry(const struct hostfile *hf, const char *host, int port);

#endif /* RINGD_HOSTFILE_H */
