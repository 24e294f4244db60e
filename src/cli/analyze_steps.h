/* analyze_steps.h: `harness analyze RUN.h5 --step S | --steps S1,S2 | --steps all`, the
 * end-of-run study at the run's weight snapshots, under /study_steps/<step> (analyze_steps.c).
 * Must not know: how the study is computed or stored. */
#ifndef ANALYZE_STEPS_H
#define ANALYZE_STEPS_H

#include "base/error.h"

/* argv[0] is "analyze"; the exit status. */
int analyze_steps_main(int argc, char **argv);
/* The study of the snapshots `want` names ("all", or "S1,S2,...") of the complete run at path,
 * each step written atomically (stored ones skipped), with its time and memory lines: the
 * command's work, and what a run with output.snapshot_study does once its file is complete. */
int analyze_steps_run(const char *path, const char *want, UserError *err);

#endif
