/* rules_command.h: `harness rules --json [RUN.h5 ...]` (rules_command.c). */
#ifndef RULES_COMMAND_H
#define RULES_COMMAND_H

/* argv[0] is "rules". Returns the exit status. */
int rules_main(int argc, char **argv);

#endif
