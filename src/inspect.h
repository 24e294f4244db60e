/* inspect.h: `harness inspect RUN.h5 --prompt TEXT | --tokens 3,17,5`: run a stored model on one
 * input and print every block tensor's runtime shape and every head's attention rows. */
#ifndef INSPECT_H
#define INSPECT_H
/* Returns the process exit status (0, or 2 after printing a user error). */
int inspect_main(int argc, char **argv);
#endif
