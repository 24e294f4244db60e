/* wait_policy.h: how long libgomp's idle threads spin before they sleep (wait_policy.c).
 * Must not know: the config, the commands. */
#ifndef WAIT_POLICY_H
#define WAIT_POLICY_H

/* First thing in main: unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, runs this program
 * again (same argv, same process, environment plus GOMP_SPINCOUNT) so that libgomp starts with a
 * bounded spin; returns only when it did not (already set, one CPU, or the exec failed). */
void wait_policy_apply(char **argv);

#endif
