/*
 * log.h - the one logging module of ringd and ringctl.  Lines go to stderr with
 * a syslog priority prefix ("<3>") when running under systemd (JOURNAL_STREAM set)
 * or when log_init is told so, else with a timestamp and level word.
 */
#ifndef PROTO_LOG_H
#define PROTO_LOG_H

#include <stdarg.h>

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

void log_init(const char *progname, int level, int syslog_prefix);
void log_set_level(int level);
int log_get_level(void);
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A configuration or command line that cannot work: exit LOG_EXIT_CONFIG,
 * which ringd's systemd units do not restart (RestartPreventExitStatus). */
#define LOG_EXIT_CONFIG	64
void fatal_config(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif /* PROTO_LOG_H */
