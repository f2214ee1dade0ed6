/*
 * auth.c - how peers prove they belong: the start-up rules and the cluster
 * secret.
 *
 * At start-up (auth_init) the TLS files must be given all three or none, key
 * and secret files must not be readable by other users, and a ring whose hosts
 * are not all on loopback must authenticate its peers (TLS or a secret) unless
 * the configuration says insecure = yes: a daemon that would let anyone on the
 * network join its ring, and read and write its jobs' memory through it, does
 * not start by accident.
 *
 * The cluster secret (secret_file, 32 bytes or more) is proven in the link
 * handshake without ever crossing the wire: each side sends a fresh random nonce
 * and each proves the secret with an HMAC-SHA256 over both nonces, both ranks,
 * the world size and the cluster name, tagged with its role (link.c has the
 * exchange).  A proof is good for one connection only: it covers the other
 * side's nonce, which that side just made up.  The role tag keeps one side's
 * proof from being reflected back as the other's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ringd.h"
#include "../proto/log.h"

#define SECRET_MIN	32	/* bytes: 256 bits, however they are written */
#define SECRET_MAX	4096
#define AUTH_TAG	"ringd link proof v1"

static uint8_t secret[SECRET_MAX];
static size_t secret_len;
/* a reload's secret, read but not yet in force (auth_reload_*) */
static uint8_t pending[SECRET_MAX];
static size_t pending_len;

/* Refuses a key or secret file that other users may read or change. */
static int
private_file(const char *key, const char *path, int fd, struct stat *st, char *err,
	     size_t errlen)
{
	if (fstat(fd, st) != 0) {
		snprintf(err, errlen, "%s %s: %s", key, path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", key, path);
		return -1;
	}
	if (st->st_mode & S_IRWXO) {
		snprintf(err, errlen, "%s %s is open to other users (mode %04o): chmod o-rwx, "
			 "the file is a credential", key, path, (unsigned)(st->st_mode & 07777));
		return -1;
	}
	return 0;
}

/* Reads a secret file into buf (SECRET_MAX bytes); its length in *outlen. */
static int
load_secret(const char *path, uint8_t *buf, size_t *outlen, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, errlen, "secret_file %s: %s", path, strerror(errno));
		return -1;
	}
	if (private_file("secret_file", path, fd, &st, err, errlen) != 0)
		goto fail;
	if (st.st_size > SECRET_MAX) {
		snprintf(err, errlen, "secret_file %s: %lld bytes, at most %d", path,
			 (long long)st.st_size, SECRET_MAX);
		goto fail;
	}
	while (len < SECRET_MAX && (n = read(fd, buf + len, SECRET_MAX - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "secret_file %s: %s", path, strerror(errno));
			goto fail;
		}
		len += (size_t)n;
	}
	close(fd);
	/* an editor's final newline must not make two hosts' secrets differ */
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (len < SECRET_MIN) {
		snprintf(err, errlen, "secret_file %s: %zu bytes, at least %d are needed "
			 "(openssl rand -hex 32 > FILE)", path, len, SECRET_MIN);
		OPENSSL_cleanse(buf, SECRET_MAX);
		return -1;
	}
	*outlen = len;
	return 0;
fail:
	close(fd);
	OPENSSL_cleanse(buf, SECRET_MAX);
	return -1;
}

static int
check_key_file(const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rc;

	if (fd < 0) {
		snprintf(err, errlen, "tls_key %s: %s", path, strerror(errno));
		return -1;
	}
	rc = private_file("tls_key", path, fd, &st, err, errlen);
	close(fd);
	return rc;
}

static bool
addr_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* 1 when every address the name resolves to is a loopback one, 0 when one
 * is not, or getaddrinfo's error (negative: EAI_*) when it does not resolve. */
static int
host_loopback(const char *host)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int all = 1, rc;

	if ((rc = getaddrinfo(host, NULL, &hints, &res)) != 0)
		return rc < 0 ? rc : -1;
	for (ai = res; ai != NULL; ai = ai->ai_next)
		if (!addr_loopback(ai->ai_addr))
			all = 0;
	freeaddrinfo(res);
	return all;
}

/* The first host (or the listen address) outside loopback, or NULL; *gai
 * gets getaddrinfo's error when that is a name that does not resolve (0
 * otherwise), and *idx its place in the hostfile (-1: the listen address). */
static const char *
first_remote(const struct ringd *rd, char *buf, size_t len, int *gai, int *idx)
{
	int i, port, lo = 1;

	*gai = 0;
	for (i = 0; i < rd->hf.n; i++)
		if ((lo = host_loopback(rd->hf.hosts[i].host)) != 1) {
			*gai = lo < 0 ? lo : 0;
			*idx = i;
			return rd->hf.hosts[i].host;
		}
	*idx = -1;
	if (rd->cfg.listen[0] != '\0' &&
	    (config_split_hostport(rd->cfg.listen, buf, len, &port, NULL, 0) != 0 ||
	     (lo = host_loopback(buf)) != 1)) {
		*gai = lo < 0 ? lo : 0;
		return rd->cfg.listen;
	}
	return NULL;
}

/* The credential files of c, checked: TLS all or nothing, the key file's
 * mode, and the secret (if any) loaded into buf.  The number of TLS files
 * given (0 or 3), or -1 with the reason in err. */
static int
load_credentials(const struct config *c, uint8_t *buf, size_t *len, char *err, size_t errlen)
{
	int ntls = !!c->tls_cert[0] + !!c->tls_key[0] + !!c->tls_ca[0];

	if (ntls != 0 && ntls != 3) {
		snprintf(err, errlen, "TLS needs tls_cert, tls_key and tls_ca together; %s%s%s"
			 "missing", c->tls_cert[0] ? "" : "tls_cert ",
			 c->tls_key[0] ? "" : "tls_key ", c->tls_ca[0] ? "" : "tls_ca ");
		return -1;
	}
	if (ntls == 3 && check_key_file(c->tls_key, err, errlen) != 0)
		return -1;
	*len = 0;
	if (c->secret_file[0] != '\0' && load_secret(c->secret_file, buf, len, err, errlen) != 0)
		return -1;
	return ntls;
}

int
auth_init(struct ringd *rd, char *err, size_t errlen)
{
	const struct config *c = &rd->cfg;
	char buf[HOSTFILE_HOST_MAX + 1];
	const char *remote;
	int ntls, gai, idx;

	if ((ntls = load_credentials(c, secret, &secret_len, err, errlen)) < 0)
		return -1;
	if (rd->world < 2 || ntls == 3 || secret_len > 0)
		return 0;
	if ((remote = first_remote(rd, buf, sizeof(buf), &gai, &idx)) == NULL)
		return 0;
	if (gai != 0 && !c->insecure) {
		/* the lookup is what is wrong (a typo, no DNS): say that first */
		char what[32] = "the listen address";

		if (idx >= 0)
			snprintf(what, sizeof(what), "host %d of the hostfile", idx);
		snprintf(err, errlen,
			 "%s, %s, does not resolve (%s): correct the name or make "
			 "it resolvable (DNS, /etc/hosts); until it resolves ringd cannot tell "
			 "whether it is on loopback, and peers beyond loopback need tls_cert, "
			 "tls_key and tls_ca or secret_file (or insecure = yes)",
			 what, remote, gai_strerror(gai));
		return -1;
	}
	if (!c->insecure) {
		snprintf(err, errlen, "%s is not a loopback address and peers would join "
			 "unauthenticated: set tls_cert, tls_key and tls_ca (scripts/gen-certs) "
			 "or secret_file, or insecure = yes to run so knowingly", remote);
		return -1;
	}
	log_warn("insecure = yes: anyone who reaches %s can join the ring as a peer", remote);
	return 0;
}

void
auth_fini(void)
{
	OPENSSL_cleanse(secret, sizeof(secret));
	secret_len = 0;
	auth_reload_abort();
}

int
auth_reload_prepare(const struct config *c, char *err, size_t errlen)
{
	auth_reload_abort();
	if (load_credentials(c, pending, &pending_len, err, errlen) < 0) {
		pending_len = 0;
		return -1;
	}
	return 0;
}

int
auth_reload_commit(void)
{
	int changed;

	if (pending_len == 0)
		return -1;
	changed = pending_len != secret_len || CRYPTO_memcmp(pending, secret, secret_len) != 0;
	OPENSSL_cleanse(secret, sizeof(secret));
	memcpy(secret, pending, pending_len);
	secret_len = pending_len;
	auth_reload_abort();
	return changed;
}

void
auth_reload_abort(void)
{
	OPENSSL_cleanse(pending, sizeof(pending));
	pending_len = 0;
}

bool
auth_have_secret(void)
{
	return secret_len > 0;
}

const char *
auth_mode(const struct ringd *rd)
{
	bool tls = rd->cfg.tls_cert[0] != '\0';

	if (tls && secret_len > 0)
		return "tls+secret";
	if (tls)
		return "tls";
	return secret_len > 0 ? "secret" : "none";
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

bool
auth_proof(const struct ringd *rd, bool by_acceptor, uint32_t connector, uint32_t acceptor,
	   const uint8_t nonce_c[PROTO_NONCE_LEN], const uint8_t nonce_a[PROTO_NONCE_LEN],
	   uint8_t mac[PROTO_MAC_LEN])
{
	uint8_t msg[sizeof(AUTH_TAG) + 1 + PROTO_NAME_MAX + 1 + 12 + 2 * PROTO_NONCE_LEN];
	unsigned int mlen = PROTO_MAC_LEN;
	size_t off = 0;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, AUTH_TAG, sizeof(AUTH_TAG));
	off += sizeof(AUTH_TAG);
	msg[off++] = by_acceptor ? 'A' : 'C';
	/* the cluster name, fixed width: one secret may serve several clusters */
	snprintf((char *)msg + off, PROTO_NAME_MAX + 1, "%s", rd->cfg.cluster);
	off += PROTO_NAME_MAX + 1;
	put32(msg + off, (uint32_t)rd->world);
	put32(msg + off + 4, connector);
	put32(msg + off + 8, acceptor);
	off += 12;
	memcpy(msg + off, nonce_c, PROTO_NONCE_LEN);
	memcpy(msg + off + PROTO_NONCE_LEN, nonce_a, PROTO_NONCE_LEN);
	off += 2 * PROTO_NONCE_LEN;
	if (secret_len == 0 ||
	    HMAC(EVP_sha256(), secret, (int)secret_len, msg, off, mac, &mlen) == NULL) {
		memset(mac, 0, PROTO_MAC_LEN);
		return false;
	}
	return true;
}

bool
auth_proof_ok(const struct ringd *rd, bool by_acceptor, uint32_t connector, uint32_t acceptor,
	      const uint8_t nonce_c[PROTO_NONCE_LEN], const uint8_t nonce_a[PROTO_NONCE_LEN],
	      const uint8_t mac[PROTO_MAC_LEN])
{
	uint8_t want[PROTO_MAC_LEN];
	bool ok;

	ok = auth_proof(rd, by_acceptor, connector, acceptor, nonce_c, nonce_a, want) &&
	     CRYPTO_memcmp(want, mac, PROTO_MAC_LEN) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}
