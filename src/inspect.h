/* inspect.h: `harness inspect RUN.h5 --prompt TEXT | --tokens 3,17,5 [--layer L] [--head H]
 * [--top K]`: run a stored model on one input and print every block tensor's runtime shape,
 * every (or the chosen) head's attention rows, and the K most likely next tokens.
 * Must not know: training, the tasks. */
#ifndef INSPECT_H
#define INSPECT_H
/* Returns the process exit status (0, or 2 after printing a user error). */
int inspect_main(int argc, char **argv);
#endif
