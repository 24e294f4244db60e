/* data_check.h: `harness data-check` (data_check.c). */
#ifndef DATA_CHECK_H
#define DATA_CHECK_H

/* `harness data-check FILE ...` (argv[0] = "data-check"): the exit status. */
int data_check_main(int argc, char **argv);

#endif
