/* study_commands.h: `harness prune` and `harness patch` (study_commands.c). */
#ifndef STUDY_COMMANDS_H
#define STUDY_COMMANDS_H

/* `harness prune RUN.h5 [--step F] [--threads N]`: argv[0] is "prune". Returns the exit status. */
int prune_main(int argc, char **argv);
/* `harness patch RUN.h5 [--batches N] [--threads N]`: argv[0] is "patch". Returns the exit status. */
int patch_main(int argc, char **argv);

#endif
