/* views.c: one model per analysis thread, the trained model for thread 0 (views.h).
 * Owns which thread runs on which model. Must not know: files, training, what the forwards are
 * for. */
#include <stdlib.h>
#include <string.h>
#include "views.h"
#include "base/util.h"

void thread_models_init(ThreadModels *tm, Model *m, int max_batch) {
    CHECK(max_batch <= m->max_batch);
    memset(tm, 0, sizeof *tm);
    tm->m = m;
    tm->n = thread_count();
    tm->views = xcalloc((size_t)tm->n, sizeof(Model)); /* n − 1 used; at least one to allocate */
    for (int t = 1; t < tm->n; t++) model_init_view(&tm->views[t - 1], m, max_batch);
    model_release_backward(m); /* idle while the threads run forwards: its pages go meanwhile */
}

Model *thread_models_get(const ThreadModels *tm, int t) {
    CHECK(t >= 0 && t < tm->n);
    return t == 0 ? tm->m : &tm->views[t - 1];
}

void thread_models_free(ThreadModels *tm) {
    for (int t = 1; t < tm->n; t++) model_free(&tm->views[t - 1]);
    free(tm->views);
    if (tm->m) model_free_scratch(tm->m);
    memset(tm, 0, sizeof *tm);
}

size_t thread_models_bytes(ModelShape shape, int B, int T, size_t sparse_floats) {
    const size_t view = model_view_activation_floats(shape, B) + model_map_floats(shape, B, T, B, 0);
    const size_t threads = (size_t)thread_count();
    return ((threads - 1) * view + threads * sparse_floats) * sizeof(float);
}
