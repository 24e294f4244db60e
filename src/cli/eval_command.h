/* eval_command.h: `harness eval` (eval_command.c). */
#ifndef EVAL_COMMAND_H
#define EVAL_COMMAND_H

#include <stdio.h>

/* `harness eval RUN.h5 [--split S] [--file PATH] [--batches N] [--threads N] [--json]`: argv[0]
 * is "eval". Returns the exit status. */
int eval_main(int argc, char **argv);
/* s as a JSON string: quotes, backslashes and control characters escaped (a path is data); the
 * JSON answers of eval and rules (rules_command.c) alike. */
void json_string(FILE *out, const char *s);

#endif
