/* generate.h: `harness generate RUN.h5`: autoregressive generation from a stored model through
 * its K/V cache (model.h's model_decode), greedy or sampled. The cache holds K and V of the K/V
 * heads only; its size is shapes.h's kv_cache_bytes_per_token, the figure `--shapes` prints.
 * Must not know: training, the tasks' data, HDF5 (the command reads through results.h), a
 * layer's arithmetic (the model's). */
#ifndef GENERATE_H
#define GENERATE_H

/* `harness generate RUN.h5 ...`: the process exit status (0, or 2 after a user error). */
int generate_main(int argc, char **argv);

#endif
