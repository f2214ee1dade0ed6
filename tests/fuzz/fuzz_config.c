/*
 * fuzz_config.c - libFuzzer target for config_parse_text, the parser behind
 * config_load: any bytes must give either a config whose fields hold the
 * header's invariants or a "NAME:LINE: reason" error that leaves the config
 * untouched.  Never a crash, a leak or a read past len.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringd/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const char *s, size_t size)
{
	if (strnlen(s, size) == size)
		abort();	/* not NUL-terminated: a truncation went wrong */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c, before;
	char err[512];
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	if (size)
		memcpy(text, data, size);
	config_defaults(&c);
	before = c;
	err[0] = '\0';
	if (config_parse_text(&c, text, size, "fuzz.conf", err, sizeof(err)) == 0) {
		check_str(c.hosts, sizeof(c.hosts));
		check_str(c.listen, sizeof(c.listen));
		check_str(c.socket, sizeof(c.socket));
		check_str(c.control, sizeof(c.control));
		check_str(c.cluster, sizeof(c.cluster));
		check_str(c.metrics_listen, sizeof(c.metrics_listen));
		if (c.socket[0] == '\0' || c.cluster[0] == '\0')
			abort();
		if (c.segment_bytes < 4096 || c.segment_bytes > (16u << 20))
			abort();
		if (c.log_level < 3 || c.log_level > 7 || c.rank < -1)
			abort();
		if (c.n_allow_users < 0 || c.n_allow_users > CONFIG_LIST_MAX ||
		    c.n_allow_groups < 0 || c.n_allow_groups > CONFIG_LIST_MAX)
			abort();
		for (int i = 0; i < c.n_allow_users; i++)
			check_str(c.allow_users[i], sizeof(c.allow_users[i]));
		for (int i = 0; i < c.n_allow_groups; i++)
			check_str(c.allow_groups[i], sizeof(c.allow_groups[i]));
	} else {
		if (strncmp(err, "fuzz.conf:", 10) != 0 ||
		    memcmp(&c, &before, sizeof(c)) != 0)
			abort();
	}
	free(text);
	return 0;
}
