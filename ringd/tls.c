/*
 * tls.c - TLS 1.3 on peer links (OpenSSL 3): the second implementation of the
 * link transport, behind the same calls as plain TCP (transport.c).
 *
 * Both sides present a certificate and both verify the other's against tls_ca;
 * beyond the chain, the peer's certificate must name (IP or DNS SAN) the host
 * the hostfile lists for the rank it should be: the host we dial (our next
 * rank, or a direct link's), and when we accept, a host of the hostfile during
 * the handshake and, once its HELLO says which, that host (transport_peer_is:
 * our previous rank for a ring link, its sender for a direct link).  A
 * certificate from another CA, none, or one for another host fails the
 * handshake with the reason in the link's last_error, on both sides (the side
 * that refuses sends an alert, which the other reads as the reason).
 *
 * The link reads into its own buffers until a read says EAGAIN and writes from
 * an evbuffer; here those become SSL_read and SSL_write.  OpenSSL may hold
 * decrypted bytes no socket event announces, which is why the link always reads
 * until EAGAIN (SSL_ERROR_WANT_READ means nothing whole is buffered).  A read
 * that must write (a key update answer) or a write that must repeat is handled
 * by asking the link's write event and by transport_rx_ready.  Kernel TLS
 * (SSL_OP_ENABLE_KTLS) is asked for unless tls_ktls = no; whether OpenSSL got it
 * for each direction is logged per link and shown by ringctl ("tls+ktls").
 *
 * SIGHUP re-reads the certificate, key and CA into a new context
 * (tls_reload_*): connections made from then on use it, while live links keep
 * the session, and through it the context, they were made with.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "transport.h"
#include "../proto/log.h"

#define TLS_STAGE	16384		/* one record's plaintext: small chains gather here */
#define TLS_WRITE_MAX	(1u << 20)	/* plaintext given to one SSL_write */
#define TLS_READ_BUF	(256u << 10)	/* OpenSSL's read-ahead buffer: few read(2)s */
#define TLS_CIPHERS	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:" \
			"TLS_CHACHA20_POLY1305_SHA256"

/* The TLS transport link.c runs (there is one per daemon), for a reload to swap
 * its context; NULL when peers use plain TCP. */
static struct transport *tls_running;

struct tls_conn {
	SSL *ssl;			/* the session */
	int peer;			/* host rank the certificate must be for */
	bool done;			/* handshake finished */
	bool broken;			/* a fatal error: no close_notify */
	bool read_wants_write;		/* SSL_read waits for the socket to take bytes */
	size_t wpend;			/* length of an SSL_write that blocked: repeated as is */
	bool wstaged;			/* ... and it was from stage, not the evbuffer */
	uint8_t stage[TLS_STAGE];	/* small chains copied into one record */
};

/* The address (without an IPv6 zone) when host is an IP literal. */
static bool
host_ip(const char *host, char *ip, size_t len)
{
	unsigned char a[sizeof(struct in6_addr)];
	const char *pct = strchr(host, '%');
	size_t n = pct ? (size_t)(pct - host) : strlen(host);

	if (n >= len)
		return false;
	memcpy(ip, host, n);
	ip[n] = '\0';
	return inet_pton(AF_INET, ip, a) == 1 || inet_pton(AF_INET6, ip, a) == 1;
}

/* "10.0.0.2:40112" of the socket's other end, for logs. */
static void
peer_addr(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char h[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &s4->sin_addr, h, sizeof(h));
			port = ntohs(s4->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &s6->sin6_addr, h, sizeof(h));
			port = ntohs(s6->sin6_port);
		}
	}
	snprintf(buf, len, "%s:%d", h, port);
}

/*
 * Puts why OpenSSL failed into the link's last_error: the verification result
 * when we refused the peer's certificate, else the first queued reason (an
 * alert the peer sent reads "tlsv1 alert unknown ca"), else the system's.
 */
static void
tls_reason(struct link *l, struct tls_conn *c, int err, const char *what)
{
	const struct host_entry *he = &l->rd->hf.hosts[c->peer];
	long vr = SSL_get_verify_result(c->ssl);
	unsigned long e = ERR_peek_error();
	char why[160], addr[64], msg[512];

	if (vr != X509_V_OK) {
		snprintf(why, sizeof(why), "its certificate is refused: %s",
			 X509_verify_cert_error_string(vr));
	} else if (e != 0) {
		const char *r = ERR_reason_error_string(e);

		if (r != NULL)
			snprintf(why, sizeof(why), "%s", r);
		else
			ERR_error_string_n(e, why, sizeof(why));
	} else if (err == SSL_ERROR_SYSCALL && errno != 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
	} else {
		snprintf(why, sizeof(why), "the connection closed");
	}
	ERR_clear_error();
	if (l->handshake_acceptor) {
		peer_addr(l->fd, addr, sizeof(addr));
		snprintf(msg, sizeof(msg), "TLS %s with %s (should be host %d, %.64s): %s",
			 what, addr, c->peer, he->host, why);
	} else {
		snprintf(msg, sizeof(msg), "TLS %s with host %d (%.64s): %s", what, c->peer,
			 he->host, why);
	}
	snprintf(l->last_error, sizeof(l->last_error), "%.*s", (int)sizeof(l->last_error) - 1,
		 msg);
}

/* Whether cert names host (an IP literal or a DNS name). */
static bool
cert_names(X509 *cert, const char *host)
{
	char ip[INET6_ADDRSTRLEN];

	if (host_ip(host, ip, sizeof(ip)))
		return X509_check_ip_asc(cert, ip, 0) == 1;
	return X509_check_host(cert, host, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
}

/* An acceptor's check of the peer's own certificate, past the chain: it must
 * be one of a host of the hostfile (which one, its HELLO says later). */
static int
accept_verify_cb(int ok, X509_STORE_CTX *xs)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct link *l = ssl != NULL ? SSL_get_app_data(ssl) : NULL;
	X509 *cert = X509_STORE_CTX_get_current_cert(xs);
	char ip[INET6_ADDRSTRLEN];
	int i;

	if (!ok || l == NULL || cert == NULL || X509_STORE_CTX_get_error_depth(xs) != 0)
		return ok;
	for (i = 0; i < l->rd->hf.n; i++)
		if (cert_names(cert, l->rd->hf.hosts[i].host))
			return 1;
	X509_STORE_CTX_set_error(xs, host_ip(l->rd->hf.hosts[0].host, ip, sizeof(ip)) ?
					 X509_V_ERR_IP_ADDRESS_MISMATCH :
					 X509_V_ERR_HOSTNAME_MISMATCH);
	return 0;
}

static bool
tls_peer_is(struct transport *t, struct link *l, int rank)
{
	struct tls_conn *c = l->tconn;
	X509 *cert;
	bool ok;

	(void)t;
	if (c == NULL || rank < 0 || rank >= l->rd->hf.n ||
	    (cert = SSL_get1_peer_certificate(c->ssl)) == NULL)
		return false;
	ok = cert_names(cert, l->rd->hf.hosts[rank].host);
	X509_free(cert);
	if (ok)
		c->peer = rank;
	return ok;
}

static int
tls_open(struct transport *t, struct link *l, bool connector)
{
	struct ringd *rd = l->rd;
	struct tls_conn *c;
	X509_VERIFY_PARAM *vp;
	const char *host;
	char ip[INET6_ADDRSTRLEN];

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -1;
	c->peer = connector ? l->peer : mod_prev(rd);
	host = rd->hf.hosts[c->peer].host;
	ERR_clear_error();
	if ((c->ssl = SSL_new(t->ctx)) == NULL || SSL_set_fd(c->ssl, l->fd) != 1)
		goto fail;
	/* The certificate must be the one of the host this rank is, not merely any
	 * host of the cluster's CA: a stolen key of one host cannot pose as another.
	 * An acceptor knows only the hosts it may be until the HELLO. */
	SSL_set_app_data(c->ssl, l);
	vp = SSL_get0_param(c->ssl);
	if (!connector) {
		SSL_set_verify(c->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
			       accept_verify_cb);
	} else if (host_ip(host, ip, sizeof(ip))) {
		if (X509_VERIFY_PARAM_set1_ip_asc(vp, ip) != 1)
			goto fail;
	} else {
		X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (X509_VERIFY_PARAM_set1_host(vp, host, 0) != 1)
			goto fail;
	}
	if (connector)
		SSL_set_connect_state(c->ssl);
	else
		SSL_set_accept_state(c->ssl);
	l->tconn = c;
	l->transport = "tls";
	return 0;
fail:
	snprintf(l->last_error, sizeof(l->last_error), "cannot set up TLS for host %d (%.64s)",
		 c->peer, host);
	ERR_clear_error();
	if (c->ssl != NULL)
		SSL_free(c->ssl);
	free(c);
	return -1;
}

static void
tls_log_up(struct link *l, struct tls_conn *c)
{
	bool tx = BIO_get_ktls_send(SSL_get_wbio(c->ssl));
	bool rx = BIO_get_ktls_recv(SSL_get_rbio(c->ssl));
	static bool said;

	l->transport = tx && rx ? "tls+ktls" : tx ? "tls+ktls-tx" : rx ? "tls+ktls-rx" : "tls";
	log_info("link %s host %d: %s %s, peer certificate verified, kernel TLS: %s",
		 l->handshake_acceptor ? "from" : "to", c->peer, SSL_get_version(c->ssl),
		 SSL_get_cipher_name(c->ssl),
		 tx && rx ? "send and receive" : tx ? "send" : rx ? "receive" : "off");
	if (!tx && !rx && !said && (SSL_get_options(c->ssl) & SSL_OP_ENABLE_KTLS)) {
		said = true;
		log_info("kernel TLS was asked for but not given: the kernel needs its 'tls' "
			 "module (modprobe tls), and OpenSSL 3.0 offloads TLS 1.3 sending only");
	}
}

static int
tls_handshake(struct transport *t, struct link *l)
{
	struct tls_conn *c = l->tconn;
	int rc, err;

	(void)t;
	if (c == NULL)
		return -1;
	if (c->done)
		return 0;
	ERR_clear_error();
	rc = SSL_do_handshake(c->ssl);
	if (rc == 1) {
		c->done = true;
		tls_log_up(l, c);
		return 0;
	}
	err = SSL_get_error(c->ssl, rc);
	if (err == SSL_ERROR_WANT_READ) {
		/* a write event left from WANT_WRITE would fire without end */
		if (l->wev != NULL)
			event_del(l->wev);
		return 1;
	}
	if (err == SSL_ERROR_WANT_WRITE) {
		event_add(l->wev, NULL);
		return 1;
	}
	c->broken = true;
	tls_reason(l, c, err, "handshake");
	return -1;
}

static ssize_t
tls_read(struct transport *t, struct link *l, void *buf, size_t len)
{
	struct tls_conn *c = l->tconn;
	int n, err;

	(void)t;
	if (c == NULL || !c->done) {
		errno = EAGAIN;
		return -1;
	}
	ERR_clear_error();
	n = SSL_read(c->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (n > 0) {
		c->read_wants_write = false;
		return n;
	}
	err = SSL_get_error(c->ssl, n);
	switch (err) {
	case SSL_ERROR_WANT_READ:
		c->read_wants_write = false;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		/* the link's write callback asks transport_rx_ready and reads again */
		c->read_wants_write = true;
		event_add(l->wev, NULL);
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0) {
			c->broken = true;
			if (errno == 0)
				return 0;
			return -1;
		}
		/* fall through */
	default:
		c->broken = true;
		tls_reason(l, c, err, "read");
		errno = EPROTO;
		return -1;
	}
}

/*
 * Writes the front of out.  A chain of a record or more goes to SSL_write where
 * it lies (an arena's payload); smaller chains (frame headers, short frames) are
 * gathered into one record first, not one record and one syscall each.  A write
 * that blocked is repeated with the same bytes and length, as OpenSSL requires;
 * they are still at the front of out, since only what went is drained.
 */
static ssize_t
tls_write(struct transport *t, struct link *l, struct evbuffer *out)
{
	struct tls_conn *c = l->tconn;
	struct evbuffer_iovec v;
	const void *p;
	size_t len;
	int n, err;

	(void)t;
	if (c == NULL || !c->done) {
		errno = EAGAIN;
		return -1;
	}
	if (evbuffer_peek(out, -1, NULL, &v, 1) < 1)
		return 0;
	if (c->wpend == 0) {
		c->wstaged = v.iov_len < TLS_STAGE;
		if (c->wstaged) {
			len = evbuffer_get_length(out);
			c->wpend = len < TLS_STAGE ? len : TLS_STAGE;
			if (evbuffer_copyout(out, c->stage, c->wpend) != (ev_ssize_t)c->wpend) {
				c->wpend = 0;
				errno = EIO;
				return -1;
			}
		} else {
			c->wpend = v.iov_len < TLS_WRITE_MAX ? v.iov_len : TLS_WRITE_MAX;
		}
	}
	p = c->wstaged ? (const void *)c->stage : v.iov_base;
	ERR_clear_error();
	n = SSL_write(c->ssl, p, (int)c->wpend);
	if (n > 0) {
		c->wpend = 0;
		evbuffer_drain(out, (size_t)n);
		return n;
	}
	err = SSL_get_error(c->ssl, n);
	switch (err) {
	case SSL_ERROR_WANT_WRITE:
	case SSL_ERROR_WANT_READ:	/* TLS 1.3 without renegotiation: not seen */
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0) {
			c->broken = true;
			if (errno == 0)
				errno = EPIPE;
			return -1;
		}
		/* fall through */
	default:
		c->broken = true;
		tls_reason(l, c, err, "write");
		errno = EPROTO;
		return -1;
	}
}

static bool
tls_rx_ready(struct transport *t, struct link *l)
{
	struct tls_conn *c = l->tconn;

	(void)t;
	return c != NULL && c->done && !c->broken &&
	       (c->read_wants_write || SSL_has_pending(c->ssl));
}

static void
tls_close(struct transport *t, struct link *l)
{
	struct tls_conn *c = l->tconn;

	(void)t;
	if (c == NULL)
		return;
	ERR_clear_error();
	/* best effort close_notify, so the peer reads an orderly end */
	if (c->done && !c->broken)
		SSL_shutdown(c->ssl);
	ERR_clear_error();
	SSL_free(c->ssl);
	free(c);
	l->tconn = NULL;
}

static void
tls_free(struct transport *t)
{
	if (tls_running == t)
		tls_running = NULL;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* The first queued OpenSSL reason, for start-up errors. */
static const char *
ssl_why(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	if (r != NULL)
		snprintf(buf, len, "%s", r);
	else if (e != 0)
		ERR_error_string_n(e, buf, len);
	else
		snprintf(buf, len, "unknown error");
	ERR_clear_error();
	return buf;
}

/*
 * Warns when our own certificate would be refused by the peers: not issued by
 * tls_ca, or not naming the host the hostfile lists for us.  Only a warning:
 * the peers decide, and they say why in their logs and in ringctl.
 */
static void
tls_check_own(SSL_CTX *ctx, const char *host)
{
	X509 *me = SSL_CTX_get0_certificate(ctx);
	X509_STORE_CTX *sc = X509_STORE_CTX_new();
	char ip[INET6_ADDRSTRLEN];
	int ok;

	if (me == NULL || sc == NULL)
		goto out;
	if (host_ip(host, ip, sizeof(ip)))
		ok = X509_check_ip_asc(me, ip, 0) == 1;
	else
		ok = X509_check_host(me, host, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
	if (!ok)
		log_warn("tls_cert does not name this host (%s) in its subjectAltName: "
			 "peers will refuse it", host);
	if (X509_STORE_CTX_init(sc, SSL_CTX_get_cert_store(ctx), me, NULL) == 1 &&
	    X509_verify_cert(sc) != 1)
		log_warn("tls_cert does not verify against tls_ca (%s): peers will refuse it",
			 X509_verify_cert_error_string(X509_STORE_CTX_get_error(sc)));
out:
	X509_STORE_CTX_free(sc);
	ERR_clear_error();
}

/*
 * The TLS context of cfg's files: our certificate chain and key, the CA that
 * peers' certificates must come from, TLS 1.3 only.  NULL with the reason in
 * err.  host is the one the hostfile lists for us (our certificate must name it).
 */
static SSL_CTX *
tls_context(const struct config *cfg, const char *host, char *err, size_t errlen)
{
	STACK_OF(X509_NAME) *cas;
	SSL_CTX *ctx = NULL;
	char why[160];

	ERR_clear_error();
	if ((ctx = SSL_CTX_new(TLS_method())) == NULL) {
		snprintf(err, errlen, "cannot create the TLS context: %s", ssl_why(why, sizeof(why)));
		return NULL;
	}
	/* 1.3 only: no renegotiation, no legacy ciphers, one round trip */
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_ciphersuites(ctx, TLS_CIPHERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
		snprintf(err, errlen, "tls_cert %s: %s", cfg->tls_cert, ssl_why(why, sizeof(why)));
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
		snprintf(err, errlen, "tls_key %s: %s", cfg->tls_key, ssl_why(why, sizeof(why)));
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "tls_key %s does not belong to tls_cert %s: %s",
			 cfg->tls_key, cfg->tls_cert, ssl_why(why, sizeof(why)));
		goto fail;
	}
	if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca, NULL) != 1) {
		snprintf(err, errlen, "tls_ca %s: %s", cfg->tls_ca, ssl_why(why, sizeof(why)));
		goto fail;
	}
	/* tells a connecting peer which CA we accept, so it picks the right chain */
	if ((cas = SSL_load_client_CA_file(cfg->tls_ca)) != NULL)
		SSL_CTX_set_client_CA_list(ctx, cas);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	/* A link lives as long as the ring: no tickets or cache to resume from (and
	 * no NewSessionTicket write hiding inside an SSL_read).  An EOF without
	 * close_notify is a closed link like any other: frames carry their length. */
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF |
			    SSL_OP_NO_RENEGOTIATION |
			    (cfg->tls_ktls ? SSL_OP_ENABLE_KTLS : 0));
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_BUF);
	tls_check_own(ctx, host);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

struct transport *
transport_tls(struct ringd *rd, char *err, size_t errlen)
{
	struct transport *t = calloc(1, sizeof(*t));
	SSL_CTX *ctx;

	if (t == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if ((ctx = tls_context(&rd->cfg, rd->hf.hosts[rd->rank].host, err, errlen)) == NULL) {
		free(t);
		return NULL;
	}
	t->name = "tls";
	t->raw = false;
	t->open = tls_open;
	t->handshake = tls_handshake;
	t->read = tls_read;
	t->write = tls_write;
	t->rx_ready = tls_rx_ready;
	t->close = tls_close;
	t->peer_is = tls_peer_is;
	t->free = tls_free;
	t->ctx = ctx;
	tls_running = t;
	return t;
}

/* Subject, serial and end of validity of a context's certificate. */
static void
tls_describe(SSL_CTX *ctx, char *buf, size_t len)
{
	X509 *me = SSL_CTX_get0_certificate(ctx);
	char subject[160] = "?", serial[80] = "?", until[64] = "?";
	BIGNUM *bn = NULL;
	BIO *b;

	if (me == NULL) {
		snprintf(buf, len, "no certificate");
		return;
	}
	X509_NAME_oneline(X509_get_subject_name(me), subject, sizeof(subject));
	if ((bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(me), NULL)) != NULL) {
		char *hex = BN_bn2hex(bn);

		if (hex != NULL) {
			snprintf(serial, sizeof(serial), "%s", hex);
			OPENSSL_free(hex);
		}
		BN_free(bn);
	}
	if ((b = BIO_new(BIO_s_mem())) != NULL) {
		if (ASN1_TIME_print(b, X509_get0_notAfter(me)) == 1) {
			int n = BIO_read(b, until, (int)sizeof(until) - 1);

			until[n > 0 ? n : 0] = '\0';
		}
		BIO_free(b);
	}
	ERR_clear_error();
	snprintf(buf, len, "subject %s, serial %s, valid until %s", subject, serial, until);
}

void *
tls_reload_prepare(const struct ringd *rd, const struct config *cfg, char *err,
		   size_t errlen)
{
	return tls_context(cfg, rd->hf.hosts[rd->rank].host, err, errlen);
}

int
tls_reload_commit(void *pending, char *what, size_t len)
{
	SSL_CTX *ctx = pending, *old;
	X509 *a, *b;
	char desc[400];
	bool same;

	if (tls_running == NULL) {
		SSL_CTX_free(ctx);
		return -1;
	}
	old = tls_running->ctx;
	a = SSL_CTX_get0_certificate(old);
	b = SSL_CTX_get0_certificate(ctx);
	tls_describe(ctx, desc, sizeof(desc));
	same = a != NULL && b != NULL && X509_cmp(a, b) == 0;
	snprintf(what, len, "%s certificate (%s)", same ? "the same" : "a new", desc);
	/* Live sessions hold a reference to the context they were made from
	 * (SSL_new), so they keep the old one until they close. */
	tls_running->ctx = ctx;
	SSL_CTX_free(old);
	return same ? 0 : 1;
}
