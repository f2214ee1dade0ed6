/*
 * lsan.c - LeakSanitizer's defaults for the test programs of an ASAN=1 build,
 * linked into every unit_* and it_* binary of such a build and into nothing
 * else.  Criterion 2.4.1 (Debian 12's libcriterion3) leaks a few blocks it
 * callocs itself in its runner process; LeakSanitizer reported them at exit and
 * failed every binary whatever its tests did.  A suppression matches any frame
 * of an allocation's stack, and Criterion is on the stack of every test, so
 * this gives up leak checks of the test processes themselves (their rank
 * processes leave by _exit and were never checked).  The daemons the tests
 * start have no such defaults and keep full leak checking, and memory errors
 * (use after free, overflows, undefined behaviour) are reported everywhere.
 */

const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void)
{
	return "leak:libcriterion.so\n";
}
