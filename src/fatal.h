/* fatal.h: what the user sees when a library, not the harness, ends the process. HDF5 1.10 calls
 * exit(-1) without a word, or crashes in its error paths, when some of its allocations fail
 * (found by tests/test_faults.py); this turns both into one line on stderr that names the
 * library. Nothing here knows of training or results files. */
#ifndef FATAL_H
#define FATAL_H

/* Install the exit and SIGSEGV/SIGBUS notes; call first thing in main. */
void fatal_install(void);

#endif
