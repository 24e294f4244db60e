/* check.h: `harness check RUN.h5`: validates a results file against docs/results-format.md.
 * Prints one line per problem and a last line "RUN.h5: ok" or "RUN.h5: N problems".
 * Returns the exit status: 0 valid, 1 problems, 2 unusable input (not HDF5, truncated, an
 * unknown format_version, no readable config_yaml) or bad arguments.
 * Must not know: training, the tasks. */
#ifndef CHECK_H
#define CHECK_H

int check_main(int argc, char **argv);

#endif
