/* state_command.h: `harness state` (state_command.c). */
#ifndef STATE_COMMAND_H
#define STATE_COMMAND_H

/* `harness state ...` (argv[0] = "state"): the exit status. */
int state_main(int argc, char **argv);

#endif
