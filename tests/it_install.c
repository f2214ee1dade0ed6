/*
 * it_install.c - `make install` and `make uninstall` as a packager and an
 * operator use them.  The tree's own Makefile installs the already built tree
 * into a private DESTDIR (PREFIX=/usr, then /opt/ringd); the test checks that
 * every file is where the README says, with its mode, that libring.pc names the
 * PREFIX of the install (not of the build), that the systemd units start the
 * installed ringd, then compiles a small client against the installed ring.h
 * and libring with nothing but `pkg-config --cflags --libs libring`, runs it
 * alone (RING_SINGLE=1) and as two ranks on two installed ringd daemons (an
 * all-reduce checked element by element), and finally has `make uninstall`
 * leave no file behind, except an operator's own ringd.conf, which neither
 * install nor uninstall may touch.  The systemd files, man pages and ringrun
 * are checked when the tree has them.  The installed ringd, ringctl, ring-bench
 * and libring.so must carry the hardening the Makefile promises (PIE, full
 * RELRO, immediate binding, stack protector, fortified libc calls), as readelf
 * sees them.
 *
 * What a user's shell and earlier installs leave behind must not change what is
 * checked: after `make install PREFIX=/tmp/x` a user exports PKG_CONFIG_PATH,
 * PATH and the like for it, and `make test` runs in that environment.  So the
 * make runs here drop every install-directory setting inherited from the
 * environment or from the make that runs us, and pkg-config and the compiler
 * see only the install under test (usr_prefix_after_a_user_install checks it).
 *
 * The test never builds: when `make -q all` says the tree is stale it fails
 * and says to run make, so it cannot rebuild a tree with other settings than
 * its owner's (CUDA=0, ASAN=1 and the like are passed on from MAKEFLAGS).
 * Make runs are serialised by a lock in the build directory because Criterion
 * runs the tests of this file side by side.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness.h"

/* An ASAN=1 tree installs an instrumented libring, which loads only into a
 * program that has the sanitizer runtime too. */
#ifdef __SANITIZE_ADDRESS__
#define SANITIZE_FLAGS "-fsanitize=address,undefined"
#else
#define SANITIZE_FLAGS ""
#endif

/* Set by the Makefile for this file: 1 when the tree is built with its
 * hardening flags (HARDEN=1, the default). */
#ifndef RING_HARDEN
#define RING_HARDEN 0
#endif

/* The Makefile's install-directory variables: none of them may come into the
 * test's make runs from the environment or from the make that runs the test. */
#define INSTALL_VARS "PREFIX DESTDIR BINDIR SBINDIR LIBDIR INCLUDEDIR PKGCONFIGDIR " \
	"MANDIR DOCDIR SYSCONFDIR SYSTEMDUNITDIR TMPFILESDIR SYSUSERSDIR GZIP_MAN"

/* Shell words that make pkg-config and the compiler see only LIBDIR/pkgconfig
 * (a printf format taking LIBDIR): no PKG_CONFIG_PATH or other PKG_CONFIG_*
 * setting of the user's, no CPATH or LIBRARY_PATH pointing at another ring.h
 * or libring. */
#define PKG_ENV "for v in $(env | sed -n 's/^\\(PKG_CONFIG_[A-Za-z0-9_]*\\)=.*/\\1/p'); " \
	"do unset \"$v\"; done; unset CPATH C_INCLUDE_PATH LIBRARY_PATH; " \
	"export PKG_CONFIG_LIBDIR='%s/pkgconfig'; "

#define OUT_CAP		(256u << 10)
#define MAKE_TIMEOUT_S	540	/* install builds the bindings first: a minute or
				 * two with the torch C++ under ASan, more on a
				 * loaded machine; nothing to build: a second */
#define CLIENT_TIMEOUT_S 60
#define LOCK_TIMEOUT_S	600

static struct ring_cluster cluster;
static char tmpdir[256];	/* DESTDIR (tmpdir/root) and the client (tmpdir/work) */
static char *out;		/* output of the last command */

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

static void teardown(void)
{
	cluster_stop(&cluster);
	if (tmpdir[0])
		nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = 0;
	free(out);
	out = NULL;
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");

	out = malloc(OUT_CAP);
	cr_assert_not_null(out);
	snprintf(tmpdir, sizeof(tmpdir), "%s/it-install.XXXXXX", t && *t ? t : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp %s: %s", tmpdir, strerror(errno));
}

/* Runs a shell command (stderr into the same output) within timeout_s; its exit
 * status, or -1 when it could not run or ran past the bound. */
static int sh(int timeout_s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(int timeout_s, const char *fmt, ...)
{
	char cmd[8192];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd) - 8, fmt, ap);
	va_end(ap);
	cr_assert(n > 0 && (size_t)n < sizeof(cmd) - 8, "command too long");
	strcat(cmd, " 2>&1");
	return harness_exec(argv, NULL, out, OUT_CAP, timeout_s);
}

/* The tail of the last output, for failure messages. */
static const char *tail(void)
{
	size_t len = strlen(out);

	return len > 3000 ? out + len - 3000 : out;
}

/* BUILD as the Makefile names it: relative to the tree when inside it, so the
 * dependency files written by the build apply. */
static const char *build_arg(void)
{
	static char build[PATH_MAX];
	const char *root = harness_root();
	size_t rl = strlen(root);
	char *slash;

	harness_bin(build, sizeof(build), "x");
	slash = strrchr(build, '/');
	*slash = 0;				/* <build>/bin */
	slash = strrchr(build, '/');
	*slash = 0;				/* <build> */
	if (strncmp(build, root, rl) == 0 && build[rl] == '/')
		memmove(build, build + rl + 1, strlen(build + rl + 1) + 1);
	return build;
}

/* Runs make in the tree with the build settings of a make that runs us (the
 * words after " -- " in MAKEFLAGS: CUDA=0, ASAN=1, ...) and ours after them,
 * which win.  Install directories are never passed on, from there or from the
 * environment: each install here says all of its own.  Jobserver flags are not
 * passed on: their descriptors are not ours.  FLAGS_KEEP=1: the build's flag
 * stamp is left as the build wrote it, so that a setting missing here cannot
 * mark the whole tree stale. */
static int make(const char *args)
{
	char lock[PATH_MAX + 32];
	int fd, rc;
	time_t deadline = time(NULL) + LOCK_TIMEOUT_S;

	snprintf(lock, sizeof(lock), "%s/%s/.it_install.lock", harness_root(), build_arg());
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", lock, strerror(errno));
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		cr_assert(errno == EWOULDBLOCK && time(NULL) < deadline,
			  "could not lock %s within %d s: %s", lock, LOCK_TIMEOUT_S,
			  strerror(errno));
		usleep(100 * 1000);
	}
	rc = sh(MAKE_TIMEOUT_S,
		"ov=; case \" ${MAKEFLAGS:-} \" in *' -- '*) ov=${MAKEFLAGS#* -- };; esac; "
		"keep=; for w in $ov; do case \" %s \" in *\" ${w%%%%=*} \"*) ;; "
		"*) keep=\"$keep $w\";; esac; done; "
		"unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES GNUMAKEFLAGS %s; "
		"exec make --no-print-directory -C '%s' $keep BUILD='%s' FLAGS_KEEP=1 %s",
		INSTALL_VARS, INSTALL_VARS, harness_root(), build_arg(), args);
	close(fd);	/* releases the lock */
	return rc;
}

/* Skips unless the tools exist; fails when the tree is not built as it is. */
static void need_built_tree(void)
{
	int rc;

	if (sh(10, "command -v make && command -v pkg-config && command -v \"${CC:-cc}\"") != 0)
		cr_skip_test("make, pkg-config or a C compiler is missing here: %s", out);
	rc = make("-q all");
	cr_assert_eq(rc, 0, "the build tree %s/%s is not up to date (make -q all exited %d): "
		     "run make first, with the settings it was built with\n%s", harness_root(),
		     build_arg(), rc, tail());
}

static bool exists(const char *dir, const char *rel)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return access(p, F_OK) == 0;
}

/* Checks DEST/rel is a regular file with mode mode. */
static void expect_file(const char *dest, const char *rel, mode_t mode)
{
	char p[PATH_MAX * 2];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dest, rel);
	cr_assert(lstat(p, &st) == 0, "make install put no %s (%s)\n%s", rel, strerror(errno),
		  tail());
	cr_assert(S_ISREG(st.st_mode), "%s is not a regular file", rel);
	cr_assert_eq(st.st_mode & 07777, mode, "%s has mode %04o, expected %04o", rel,
		     (unsigned)(st.st_mode & 07777), (unsigned)mode);
}

/* Reads a whole small file; NULL when missing. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 1u << 20);
	cr_assert_not_null(buf);
	n = fread(buf, 1, (1u << 20) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void expect_same(const char *installed, const char *source)
{
	char *a = slurp(installed), *b = slurp(source);

	cr_assert(a && b, "cannot read %s or %s", installed, source);
	cr_assert_str_eq(a, b, "%s differs from %s", installed, source);
	free(a);
	free(b);
}

/* Everything but directories left under dir, as "path\n" lines in list. */
static char leftovers[8192];
static size_t nleft;
static int left_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	size_t len = strlen(leftovers);

	if (flag != FTW_D && flag != FTW_DP) {
		nleft++;
		snprintf(leftovers + len, sizeof(leftovers) - len, "%s\n", path);
	}
	return 0;
}

static size_t files_under(const char *dir)
{
	leftovers[0] = 0;
	nleft = 0;
	nftw(dir, left_cb, 16, FTW_PHYS);
	return nleft;
}

/* The tree's files of one kind (a glob relative to the tree), one by one. */
static size_t tree_glob(const char *pattern, char names[][128], size_t cap)
{
	size_t n = 0;

	cr_assert_eq(sh(10, "cd '%s' && for f in %s; do [ -e \"$f\" ] && echo \"$f\"; done; true",
			harness_root(), pattern), 0, "listing %s failed", pattern);
	for (char *save, *l = strtok_r(out, "\n", &save); l && n < cap;
	     l = strtok_r(NULL, "\n", &save))
		snprintf(names[n++], 128, "%s", l);
	return n;
}

static const char client_src[] =
	"/* a client as a user writes it: only <ring.h> and pkg-config */\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"#include <stdlib.h>\n"
	"#include <string.h>\n"
	"#include <ring.h>\n"
	"\n"
	"static void print_lib(void)\n"
	"{\n"
	"	char line[4096];\n"
	"	FILE *f = fopen(\"/proc/self/maps\", \"r\");\n"
	"\n"
	"	while (f && fgets(line, sizeof(line), f))\n"
	"		if (strstr(line, \"libring.so\") && strchr(line, '/')) {\n"
	"			printf(\"loaded %s\", strchr(line, '/'));\n"
	"			break;\n"
	"		}\n"
	"	if (f)\n"
	"		fclose(f);\n"
	"}\n"
	"\n"
	"int main(void)\n"
	"{\n"
	"	size_t count = 100003, j;\n"
	"	ring_comm *comm;\n"
	"	int64_t *buf;\n"
	"	float *avg;\n"
	"	int rc, r, n;\n"
	"\n"
	"	rc = ring_open(&comm, NULL);\n"
	"	if (rc) {\n"
	"		printf(\"ring_open: %s: %s\\n\", ring_strerror(rc), ring_last_error(NULL));\n"
	"		return 1;\n"
	"	}\n"
	"	r = ring_rank(comm);\n"
	"	n = ring_size(comm);\n"
	"	buf = malloc(count * sizeof(*buf));\n"
	"	avg = ring_alloc(comm, 4096 * sizeof(*avg));\n"
	"	if (!buf || !avg) {\n"
	"		printf(\"out of memory: %s\\n\", ring_last_error(comm));\n"
	"		return 1;\n"
	"	}\n"
	"	for (j = 0; j < count; j++)\n"
	"		buf[j] = (int64_t)r * 1000003 + (int64_t)j;\n"
	"	for (j = 0; j < 4096; j++)\n"
	"		avg[j] = (float)(r * 2);\n"
	"	rc = ring_allreduce(comm, buf, buf, count, RING_INT64, RING_SUM);\n"
	"	if (!rc)\n"
	"		rc = ring_allreduce(comm, avg, avg, 4096, RING_FLOAT32, RING_AVG);\n"
	"	if (!rc)\n"
	"		rc = ring_barrier(comm);\n"
	"	if (rc) {\n"
	"		printf(\"rank %d: %s: %s\\n\", r, ring_strerror(rc), ring_last_error(comm));\n"
	"		return 1;\n"
	"	}\n"
	"	for (j = 0; j < count; j++) {\n"
	"		int64_t want = (int64_t)1000003 * n * (n - 1) / 2 + (int64_t)n * (int64_t)j;\n"
	"\n"
	"		if (buf[j] != want) {\n"
	"			printf(\"rank %d: element %zu is %lld, expected %lld\\n\", r, j,\n"
	"			       (long long)buf[j], (long long)want);\n"
	"			return 1;\n"
	"		}\n"
	"	}\n"
	"	for (j = 0; j < 4096; j++)\n"
	"		if (avg[j] != (float)(n - 1)) {\n"
	"			printf(\"rank %d: average %zu is %g, expected %d\\n\", r, j,\n"
	"			       (double)avg[j], n - 1);\n"
	"			return 1;\n"
	"		}\n"
	"#if defined(RING_HAVE_CUDA) && RING_HAVE_CUDA\n"
	"	{\n"
	"		/* pkg-config's Cflags declared them; the library has them */\n"
	"		int (*volatile f)(ring_comm *, const void *, void *, size_t,\n"
	"				  enum ring_dtype, enum ring_op, struct CUstream_st *) =\n"
	"			ring_allreduce_cuda;\n"
	"\n"
	"		if (f)\n"
	"			printf(\"cuda entry points: declared\\n\");\n"
	"	}\n"
	"#endif\n"
	"	printf(\"rank %d of %d: ok\\n\", r, n);\n"
	"	print_lib();\n"
	"	ring_free(comm, avg);\n"
	"	free(buf);\n"
	"	return ring_close(comm) != 0;\n"
	"}\n";

/* Starts the client with RING_SOCKET = socket (NULL: RING_SINGLE=1 instead),
 * its output into outfile. */
static pid_t client_start(const char *client, const char *libdir, const char *socket,
			  const char *outfile)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("LD_LIBRARY_PATH", libdir, 1);
		setenv("RING_JOB", "it-install", 1);
		setenv("RING_TIMEOUT_MS", "20000", 1);
		unsetenv("RING_RANK");
		unsetenv("RING_WORLD_SIZE");
		unsetenv("RING_LOCAL_RANK");
		unsetenv("RING_LOCAL_SIZE");
		if (socket) {
			setenv("RING_SOCKET", socket, 1);
			unsetenv("RING_SINGLE");
		} else {
			unsetenv("RING_SOCKET");
			setenv("RING_SINGLE", "1", 1);
		}
		execl(client, client, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits for the clients within CLIENT_TIMEOUT_S (killing what is left then) and
 * checks each exited 0, said ok and ran the installed libring. */
static void clients_check(pid_t *pids, int n, char outfiles[][PATH_MAX], const char *libdir)
{
	time_t deadline = time(NULL) + CLIENT_TIMEOUT_S;
	int status[16], left = n;

	for (int i = 0; i < n; i++)
		status[i] = -1;
	while (left > 0 && time(NULL) < deadline) {
		for (int i = 0; i < n; i++) {
			int st;

			if (status[i] == -1 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
				status[i] = st;
				left--;
			}
		}
		if (left)
			usleep(50 * 1000);
	}
	for (int i = 0; i < n; i++)
		if (status[i] == -1) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	for (int i = 0; i < n; i++) {
		char *o = slurp(outfiles[i]), want[64], lib[PATH_MAX + 16];

		cr_assert_not_null(o, "no output from client %d", i);
		cr_assert(status[i] != -1, "client %d did not finish within %d s:\n%s", i,
			  CLIENT_TIMEOUT_S, o);
		cr_assert(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0,
			  "client %d failed (status 0x%x):\n%s", i, status[i], o);
		snprintf(want, sizeof(want), "rank %d of %d: ok\n", i, n);
		cr_assert(strstr(o, want), "client %d did not say \"%.*s\":\n%s", i,
			  (int)strlen(want) - 1, want, o);
		snprintf(lib, sizeof(lib), "loaded %s/libring.so.0", libdir);
		cr_assert(strstr(o, lib), "client %d did not run the installed %s/libring.so.0:\n%s",
			  i, libdir, o);
		free(o);
	}
}

/* The hardening of the Makefile (HARDEN=1) in the installed file DIR/REL, as
 * readelf (binutils, which build-essential brings) sees it: a position-
 * independent program (ELF type DYN, PIE in DT_FLAGS_1) or a shared library,
 * full RELRO (a GNU_RELRO segment and immediate binding: BIND_NOW, or NOW in
 * DT_FLAGS_1), the stack protector (__stack_chk_fail imported) and, in an
 * optimised build without ASAN, fortified libc calls (some __*_chk imported). */
/* Whether word appears on the line that starts at line (NULL: no line). */
static bool line_has(const char *line, const char *word)
{
	const char *w = line ? strstr(line, word) : NULL;

	return w && w < strchrnul(line, '\n');
}

static void expect_hardened(const char *dir, const char *rel, bool program)
{
	char path[PATH_MAX * 2];
	const char *type, *flags1;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	rc = sh(30, "LC_ALL=C readelf -W --file-header --program-headers --dynamic "
		"--dyn-syms '%s'", path);
	cr_assert_eq(rc, 0, "readelf (binutils) on %s exited %d:\n%s", rel, rc, tail());
	type = strstr(out, "Type:");
	cr_assert(type && strncmp(type + strspn(type + 5, " ") + 5, "DYN ", 4) == 0,
		  "%s is not position-independent (ELF type is not DYN):\n%.80s", rel,
		  type ? type : "(no Type: line)");
	flags1 = strstr(out, "(FLAGS_1)");
	if (program)
		cr_assert(line_has(flags1, " PIE"), "%s is not a PIE program (no PIE in "
			  "DT_FLAGS_1): linked without -pie?", rel);
	cr_assert(strstr(out, "GNU_RELRO"), "%s has no GNU_RELRO segment: linked without "
		  "-z relro?", rel);
	cr_assert(strstr(out, "BIND_NOW") || line_has(flags1, " NOW"), "%s is not bound at "
		  "load (no BIND_NOW, no NOW in DT_FLAGS_1): linked without -z now?", rel);
	cr_assert(strstr(out, " __stack_chk_fail"), "%s imports no __stack_chk_fail: "
		  "compiled without -fstack-protector-strong?", rel);
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
	/* "__snprintf_chk@GLIBC_2.3.4"; __stack_chk_fail does not match "_chk@" */
	cr_assert(strstr(out, "_chk@"), "%s imports no fortified libc call (__*_chk): "
		  "compiled without -D_FORTIFY_SOURCE=2?", rel);
#endif
}

/* make install DESTDIR=tmpdir/root PREFIX=/usr of the built tree, checked file by
 * file and then used: a client built with pkg-config, run alone and on two
 * installed daemons; make uninstall leaves nothing. */
static void check_usr_install(void)
{
	char dest[512], work[512], usr[600], args[1024], src[PATH_MAX * 2], names[32][128];
	char outfiles[2][PATH_MAX], client[PATH_MAX], libdir[PATH_MAX], bin[PATH_MAX * 2];
	const char *root = harness_root();
	size_t n;
	pid_t pids[2];
	bool cuda;
	int rc;

	need_built_tree();
	snprintf(dest, sizeof(dest), "%s/root", tmpdir);
	snprintf(work, sizeof(work), "%s/work", tmpdir);
	snprintf(usr, sizeof(usr), "%s/usr", dest);
	cr_assert_eq(mkdir(work, 0755), 0);

	/* The build tree was made with the default PREFIX (/usr/local): the .pc
	 * installed with PREFIX=/usr must say /usr all the same, and nothing may
	 * be rebuilt for it (need_built_tree saw the tree up to date). */
	snprintf(args, sizeof(args), "install DESTDIR='%s' PREFIX=/usr", dest);
	rc = make(args);
	cr_assert_eq(rc, 0, "make %s exited %d:\n%s", args, rc, tail());
	cr_assert(!strstr(out, "  CC ") && !strstr(out, "  LD ") && !strstr(out, "  AR "),
		  "make install rebuilt an up-to-date tree:\n%s", tail());

	expect_file(usr, "sbin/ringd", 0755);
	expect_file(usr, "bin/ringctl", 0755);
	expect_file(usr, "bin/ring-bench", 0755);
	expect_file(usr, "bin/ring-local", 0755);
	expect_file(usr, "lib/libring.so.0", 0755);
	expect_file(usr, "lib/libring.a", 0644);
	expect_file(usr, "include/ring.h", 0644);
	expect_file(usr, "lib/pkgconfig/libring.pc", 0644);
	if (RING_HARDEN) {
		expect_hardened(usr, "sbin/ringd", true);
		expect_hardened(usr, "bin/ringctl", true);
		expect_hardened(usr, "bin/ring-bench", true);
		expect_hardened(usr, "lib/libring.so.0", false);
	}
	{
		char link[PATH_MAX * 2], target[PATH_MAX];
		ssize_t len;

		snprintf(link, sizeof(link), "%s/lib/libring.so", usr);
		len = readlink(link, target, sizeof(target) - 1);
		cr_assert(len > 0, "lib/libring.so is not a symbolic link");
		target[len] = 0;
		cr_assert_str_eq(target, "libring.so.0", "lib/libring.so points at %s", target);
	}
	snprintf(src, sizeof(src), "%s/libring/ring.h", root);
	snprintf(bin, sizeof(bin), "%s/include/ring.h", usr);
	expect_same(bin, src);

	if (exists(root, "scripts/ringrun"))
		expect_file(usr, "bin/ringrun", 0755);
	n = tree_glob("systemd/*.service systemd/*.socket systemd/*.target", names, 32);
	for (size_t i = 0; i < n; i++) {
		char rel[256], *unit;

		snprintf(rel, sizeof(rel), "lib/systemd/system/%s", strrchr(names[i], '/') + 1);
		expect_file(usr, rel, 0644);
		snprintf(bin, sizeof(bin), "%s/%s", usr, rel);
		unit = slurp(bin);
		cr_assert_not_null(unit);
		if (strstr(unit, "ExecStart="))
			cr_assert(strstr(unit, "ExecStart=/usr/sbin/ringd"),
				  "%s does not start /usr/sbin/ringd:\n%s", rel, unit);
		free(unit);
	}
	if (exists(root, "systemd/ringd.tmpfiles"))
		expect_file(usr, "lib/tmpfiles.d/ringd.conf", 0644);
	if (exists(root, "systemd/ringd.sysusers"))
		expect_file(usr, "lib/sysusers.d/ringd.conf", 0644);
	if (exists(root, "systemd/ringd.conf.example")) {
		expect_file(usr, "share/doc/ringd/ringd.conf.example", 0644);
		expect_file(dest, "etc/ringd/ringd.conf", 0644);	/* there was none */
	}
	n = tree_glob("man/*.[1-8]", names, 32);
	for (size_t i = 0; i < n; i++) {
		char rel[256];
		const char *base = strrchr(names[i], '/') + 1;

		snprintf(rel, sizeof(rel), "share/man/man%s/%s", strrchr(base, '.') + 1, base);
		expect_file(usr, rel, 0644);
	}

	/* pkg-config sees only the installed libring; the sysroot maps /usr. */
	snprintf(libdir, sizeof(libdir), "%s/lib", usr);
	rc = sh(30, PKG_ENV "pkg-config --variable=prefix libring",
		libdir);
	cr_assert_eq(rc, 0, "pkg-config does not find the installed libring.pc:\n%s", out);
	cr_assert_str_eq(out, "/usr\n", "the installed libring.pc says prefix=%s", out);
	rc = sh(30, PKG_ENV "pkg-config --modversion libring", libdir);
	cr_assert(rc == 0 && strcmp(out, RING_VERSION_STRING "\n") == 0,
		  "pkg-config --modversion libring said %s", out);
	rc = sh(30, PKG_ENV "pkg-config --variable=cuda libring",
		libdir);
	cr_assert(rc == 0 && (strcmp(out, "0\n") == 0 || strcmp(out, "1\n") == 0),
		  "pkg-config --variable=cuda libring said %s", out);
	cuda = out[0] == '1';
	rc = sh(30, PKG_ENV "pkg-config --cflags libring", libdir);
	cr_assert_eq(rc, 0, "pkg-config --cflags libring: %s", out);
	cr_assert_eq(strstr(out, "-DRING_HAVE_CUDA=1") != NULL, cuda,
		     "libring.pc says cuda=%d but its Cflags are: %s", cuda, out);

	snprintf(src, sizeof(src), "%s/client.c", work);
	{
		FILE *f = fopen(src, "w");

		cr_assert_not_null(f);
		cr_assert_eq(fputs(client_src, f) >= 0 && fclose(f) == 0, 1);
	}
	snprintf(client, sizeof(client), "%s/client", work);
	rc = sh(120, PKG_ENV "cd '%s' && export PKG_CONFIG_SYSROOT_DIR='%s' && "
		"\"${CC:-cc}\" -std=c11 -Wall -Wextra -Werror "
		"%s -o client client.c $(pkg-config --cflags --libs libring)", libdir, work, dest,
		SANITIZE_FLAGS);
	cr_assert_eq(rc, 0, "compiling a client with pkg-config failed:\n%s", out);

	/* Alone: a size-1 group, no daemon. */
	snprintf(outfiles[0], sizeof(outfiles[0]), "%s/single.out", work);
	pids[0] = client_start(client, libdir, NULL, outfiles[0]);
	clients_check(pids, 1, outfiles, libdir);
	if (cuda) {
		char *o = slurp(outfiles[0]);

		cr_assert(o && strstr(o, "cuda entry points: declared"),
			  "a CUDA libring, but the client saw no ring_allreduce_cuda:\n%s", o);
		free(o);
	}

	/* Two ranks on two installed daemons (the harness stops them whatever
	 * happens), which the installed ringctl finds healthy. */
	snprintf(bin, sizeof(bin), "%s/sbin/ringd", usr);
	setenv("RINGD", bin, 1);
	cr_assert_eq(cluster_start(&cluster, 2, NULL), 0, "could not start 2 installed ringd");
	rc = sh(30, "'%s/bin/ringctl' --control '%s' status", usr, cluster.controls[0]);
	cr_assert_eq(rc, 0, "the installed ringctl status exited %d:\n%s", rc, out);
	for (int i = 0; i < 2; i++) {
		snprintf(outfiles[i], sizeof(outfiles[i]), "%s/rank%d.out", work, i);
		pids[i] = client_start(client, libdir, cluster.sockets[i], outfiles[i]);
	}
	clients_check(pids, 2, outfiles, libdir);
	cluster_stop(&cluster);

	snprintf(args, sizeof(args), "uninstall DESTDIR='%s' PREFIX=/usr", dest);
	rc = make(args);
	cr_assert_eq(rc, 0, "make %s exited %d:\n%s", args, rc, tail());
	cr_assert_eq(files_under(dest), 0, "make uninstall left %zu files:\n%s", nleft, leftovers);
}

Test(install, usr_prefix_client_with_pkg_config, .init = setup, .fini = teardown,
     .timeout = 600)
{
	check_usr_install();
}

/* Install, then test, as users do: an earlier `make install PREFIX=/tmp/x`
 * (here into a DESTDIR of its own), with the environment a user sets to use
 * it (PKG_CONFIG_PATH, PATH, LD_LIBRARY_PATH, CPATH, LIBRARY_PATH) and the
 * install settings still exported, must not change what the PREFIX=/usr
 * install says or what its client builds and loads.  It did: pkg-config found
 * /tmp/x's libring.pc first and the test read "prefix=/tmp/x". */
Test(install, usr_prefix_after_a_user_install, .init = setup, .fini = teardown,
     .timeout = 600)
{
	char user[512], x[600], args[1024], var[PATH_MAX * 4];
	int rc;

	need_built_tree();
	snprintf(user, sizeof(user), "%s/user", tmpdir);
	snprintf(x, sizeof(x), "%s/tmp/x", user);
	snprintf(args, sizeof(args), "install DESTDIR='%s' PREFIX=/tmp/x", user);
	rc = make(args);
	cr_assert_eq(rc, 0, "make %s exited %d:\n%s", args, rc, tail());
	snprintf(var, sizeof(var), "%s/lib/pkgconfig", x);
	setenv("PKG_CONFIG_PATH", var, 1);
	snprintf(var, sizeof(var), "%s/bin:%s/sbin:%s", x, x, getenv("PATH") ? getenv("PATH") : "");
	setenv("PATH", var, 1);
	snprintf(var, sizeof(var), "%s/lib", x);
	setenv("LD_LIBRARY_PATH", var, 1);
	setenv("LIBRARY_PATH", var, 1);
	snprintf(var, sizeof(var), "%s/include", x);
	setenv("CPATH", var, 1);
	setenv("PREFIX", "/tmp/x", 1);
	setenv("DESTDIR", user, 1);
	setenv("LIBDIR", "/tmp/x/lib", 1);
	rc = sh(10, "pkg-config --variable=prefix libring");
	cr_assert(rc == 0 && strcmp(out, "/tmp/x\n") == 0,
		  "the user's install is not what pkg-config finds first (%d: %s)", rc, out);

	check_usr_install();
}

Test(install, opt_prefix_keeps_operator_config, .init = setup, .fini = teardown,
     .timeout = 600)
{
	static const char mine[] = "# the operator's own\nhosts = /etc/ringd/hosts\n";
	char dest[512], opt[600], conf[PATH_MAX], args[1024];
	char names[32][128], path[PATH_MAX * 2], *text;
	const char *root = harness_root();
	size_t n;
	FILE *f;
	int rc;

	need_built_tree();
	snprintf(dest, sizeof(dest), "%s/root", tmpdir);
	snprintf(opt, sizeof(opt), "%s/opt/ringd", dest);
	snprintf(conf, sizeof(conf), "%s/etc/ringd/ringd.conf", dest);
	cr_assert_eq(sh(10, "mkdir -p '%s/etc/ringd'", dest), 0);
	f = fopen(conf, "w");
	cr_assert_not_null(f);
	cr_assert(fputs(mine, f) >= 0 && fclose(f) == 0);

	snprintf(args, sizeof(args), "install DESTDIR='%s' PREFIX=/opt/ringd", dest);
	rc = make(args);
	cr_assert_eq(rc, 0, "make %s exited %d:\n%s", args, rc, tail());
	text = slurp(conf);
	cr_assert(text && strcmp(text, mine) == 0, "make install changed the operator's "
		  "ringd.conf; it now reads:\n%s", text ? text : "(gone)");
	free(text);

	snprintf(path, sizeof(path), "%s/lib/pkgconfig/libring.pc", opt);
	text = slurp(path);
	cr_assert_not_null(text, "no libring.pc under /opt/ringd:\n%s", tail());
	cr_assert(strstr(text, "\nprefix=/opt/ringd\n"), "libring.pc for PREFIX=/opt/ringd:\n%s",
		  text);
	free(text);

	/* The units start the ringd of this install, wherever the tree's say. */
	n = tree_glob("systemd/*.service", names, 32);
	for (size_t i = 0; i < n; i++) {
		char *unit, *src_unit;

		snprintf(path, sizeof(path), "%s/%s", root, names[i]);
		src_unit = slurp(path);
		snprintf(path, sizeof(path), "%s/lib/systemd/system/%s", opt,
			 strrchr(names[i], '/') + 1);
		unit = slurp(path);
		cr_assert(unit && src_unit, "%s was not installed", names[i]);
		if (strstr(src_unit, "sbin/ringd"))
			cr_assert(strstr(unit, "=/opt/ringd/sbin/ringd") &&
				  !strstr(unit, "/usr/sbin/ringd"),
				  "%s as installed for /opt/ringd:\n%s", names[i], unit);
		free(unit);
		free(src_unit);
	}

	snprintf(path, sizeof(path), "%s/sbin/ringd", opt);
	rc = sh(10, "'%s' --version", path);
	cr_assert(rc == 0 && strstr(out, "ringd " RING_VERSION_STRING),
		  "the installed ringd --version exited %d:\n%s", rc, out);

	/* A second install over the first changes nothing of the operator's. */
	rc = make(args);
	cr_assert_eq(rc, 0, "make %s (again) exited %d:\n%s", args, rc, tail());

	snprintf(args, sizeof(args), "uninstall DESTDIR='%s' PREFIX=/opt/ringd", dest);
	rc = make(args);
	cr_assert_eq(rc, 0, "make %s exited %d:\n%s", args, rc, tail());
	text = slurp(conf);
	cr_assert(text && strcmp(text, mine) == 0, "make uninstall changed or removed the "
		  "operator's ringd.conf");
	free(text);
	cr_assert_eq(files_under(dest), 1, "make uninstall left %zu files (only the operator's "
		     "ringd.conf should stay):\n%s", nleft, leftovers);
}
