/* eval_command.h: `harness eval` (eval_command.c). */
#ifndef EVAL_COMMAND_H
#define EVAL_COMMAND_H

/* `harness eval RUN.h5 [--split S] [--file PATH] [--batches N] [--threads N] [--json]`: argv[0]
 * is "eval". Returns the exit status. */
int eval_main(int argc, char **argv);

#endif
