/* fatal.h: what the user sees when a library, not the harness, ends the process. HDF5 1.10 calls
 * exit(-1) without a word, or crashes in its error paths, when some of its allocations fail
 * (found by tests/test_faults.py); this turns both into one line on stderr that names the
 * library. Nothing here knows of training or results files. */
#ifndef FATAL_H
#define FATAL_H

/* Install the exit and SIGSEGV/SIGBUS/SIGABRT notes; call first thing in main. */
void fatal_install(void);

/* A temporary file to remove if a library ends the process while it is open (a temporary that
 * HDF5 was closing may already say "complete"); forget it once it is renamed or removed. Up to
 * six at once (the results file, a checkpoint, the output lock, a copy). */
void fatal_remove_on_death(const char *path);
void fatal_forget(const char *path);

/* SIGINT/SIGTERM where no loop polls for them (parsing, reading, the study, writing): remove
 * the registered temporaries, say so in one line, exit 130 at once. Async-signal-safe. */
void fatal_stop_now(int signum);

/* In a forked child that reads a file which may be damaged: die of a crash's signal without a
 * note, leave the parent's temporaries alone, say nothing at exit (the parent reports). */
void fatal_in_child(void);

#endif
