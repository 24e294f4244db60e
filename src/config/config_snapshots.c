/* config_snapshots.c: output.snapshots, the steps whose weights a run keeps (config.h): the
 * schedule's syntax and its check, and the one rule for which steps are in it, which the step
 * loop, the budget of memory and disk, and `harness check` all call.
 * Must not know: the model, the results file. */
#include "config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/util.h"

enum { MAX_LISTED = CONFIG_SNAPSHOTS_MAX / 2 + 1 }; /* "0,1,2,..." takes two characters a step */

typedef struct {
    int log;       /* 1: 0, 1, 2, 4, ... (powers of two below every), then every `every` */
    int64_t every; /* log:N's N; 0 = powers of two to the end */
    int n;         /* a list's steps */
    int64_t step[MAX_LISTED];
} Schedule;

/* The schedule of a non-empty output.snapshots; NULL, or what is wrong with it (into why). */
static const char *parse(const Config *cfg, Schedule *s, char *why, size_t size) {
    memset(s, 0, sizeof *s);
    const char *p = cfg->snapshots;
    if (!strncmp(p, "log", 3) && (p[3] == '\0' || p[3] == ':')) {
        s->log = 1;
        if (p[3] == '\0') return NULL;
        char *end;
        errno = 0;
        long long every = strtoll(p + 4, &end, 10);
        if (end == p + 4 || *end || errno || every < 1) {
            snprintf(why, size, "'%s': log:N needs a whole number of steps N >= 1 (log:100)", p);
            return why;
        }
        s->every = every;
        return NULL;
    }
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ',') || (*end && !end[1]) || v < 0) {
            snprintf(why, size,
                     "'%s' is none of log, log:N (powers of two below N, then every N steps) and a "
                     "comma-separated list of steps (0,100,200)",
                     cfg->snapshots);
            return why;
        }
        if (s->n && v <= s->step[s->n - 1]) {
            snprintf(why, size, "'%s': the steps must increase (%lld after %lld)", cfg->snapshots, v,
                     (long long)s->step[s->n - 1]);
            return why;
        }
        if (v > cfg->steps) {
            snprintf(why, size, "'%s' names step %lld, past train.steps %d", cfg->snapshots, v, cfg->steps);
            return why;
        }
        s->step[s->n++] = v;
        p = *end ? end + 1 : end;
    }
    return NULL;
}

const char *config_snapshots_problem(const Config *cfg, char *why, size_t size) {
    Schedule s;
    return cfg->snapshots[0] ? parse(cfg, &s, why, size) : NULL;
}

/* The first step >= from of the schedule s of cfg, the last step (cfg->steps) at the latest. */
static int64_t next_of(const Schedule *s, const Config *cfg, int64_t from) {
    int64_t best = cfg->steps;
    if (s->log) {
        int64_t power = 1;
        while (power < from) power <<= 1;
        int64_t candidate = from == 0                           ? 0
                            : s->every == 0 || power < s->every ? power
                                                                : (from + s->every - 1) / s->every * s->every;
        if (candidate < best) best = candidate;
    }
    for (int i = 0; i < s->n; i++)
        if (s->step[i] >= from) {
            if (s->step[i] < best) best = s->step[i];
            break;
        }
    return best;
}

int config_snapshot_next(const Config *cfg, int from) {
    if (!cfg->snapshots[0] || from < 0 || from > cfg->steps) return -1;
    Schedule s;
    char why[CONFIG_SNAPSHOTS_MAX + 160];
    CHECK(parse(cfg, &s, why, sizeof why) == NULL); /* config_validate said so */
    return (int)next_of(&s, cfg, from);
}

int config_snapshot_count(const Config *cfg) {
    if (!cfg->snapshots[0]) return 0;
    Schedule s;
    char why[CONFIG_SNAPSHOTS_MAX + 160];
    CHECK(parse(cfg, &s, why, sizeof why) == NULL);
    int n = 0;
    for (int64_t step = next_of(&s, cfg, 0);; step = next_of(&s, cfg, step + 1)) {
        n++;
        if (step >= cfg->steps) return n;
    }
}
