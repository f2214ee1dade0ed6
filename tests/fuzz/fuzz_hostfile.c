/*
 * fuzz_hostfile.c - libFuzzer target for hostfile_parse: any bytes, in any of
 * the three formats the parser detects, must give either a valid membership or
 * an error message, never a crash, a leak or a read past len.  Accepted entries
 * are checked against the header's promises, so a parser that lets a bad port
 * or host through fails here too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringd/hostfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hostfile hf;
	char err[256];
	/* A private copy, so ASan catches any read past size. */
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	if (size)
		memcpy(text, data, size);
	err[0] = '\0';
	if (hostfile_parse(&hf, text, size, HOSTFILE_DEFAULT_PORT, err, sizeof(err)) == 0) {
		if (hf.n < 1 || hf.n > HOSTFILE_MAX_HOSTS)
			abort();
		for (int i = 0; i < hf.n; i++) {
			const struct host_entry *e = &hf.hosts[i];
			size_t n = strnlen(e->host, sizeof(e->host));

			if (n == 0 || n > HOSTFILE_HOST_MAX || e->port < 1 || e->port > 65535 ||
			    e->slots < 0)
				abort();
		}
		hostfile_free(&hf);
	} else {
		if (err[0] == '\0' || hf.hosts || hf.n)
			abort();
	}
	free(text);
	return 0;
}
