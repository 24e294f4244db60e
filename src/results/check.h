/* check.h: `harness check RUN.h5 ...`: validates results files against docs/results-format.md,
 * each in a forked child (a file that crashes HDF5 is reported damaged, not fatal).
 * Prints one line per problem and a last line "RUN.h5: ok" or "RUN.h5: N problems" per file.
 * Returns the exit status, the worst of the files': 0 valid, 1 problems, 2 unusable input (not
 * HDF5, truncated, damaged, an unknown format_version, no readable config_yaml) or bad
 * arguments.
 * Must not know: training, the tasks. */
#ifndef CHECK_H
#define CHECK_H

int check_main(int argc, char **argv);

#endif
