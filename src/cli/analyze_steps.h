/* analyze_steps.h: `harness analyze RUN.h5 --step S | --steps S1,S2 | --steps all`, the
 * end-of-run study at the run's weight snapshots, under /study_steps/<step> (analyze_steps.c).
 * Must not know: how the study is computed or stored. */
#ifndef ANALYZE_STEPS_H
#define ANALYZE_STEPS_H

/* argv[0] is "analyze"; the exit status. */
int analyze_steps_main(int argc, char **argv);

#endif
