/* test_config.c: table-driven tests of the YAML config loader (the files of src/config/ only).
 * suite: config loader
 *
 * Each case is a YAML text, optional --set overrides, and either the error we expect (its
 * "LINE:COL" and a phrase of the message) or a check of the loaded values. Errors are what
 * users see, so the exact location and wording are the point of most cases. Ends with
 * "N passed, M failed" and exits 1 on any failure. */
#include "config/config.h"
#include "config/config_internal.h" /* config_n_keys: the key table's length */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    const char *yaml;                /* written to the temp config; "@DATA@" becomes a readable data file */
    const char *sets[3];             /* config_set overrides applied after loading */
    const char *where;               /* expected error "LINE:COL", "--set:LINE:COL", or NULL when valid */
    const char *expect;              /* a phrase the error message must contain */
    int (*check)(const Config *cfg); /* valid configs: are the values right? */
    const char *path;                /* load this path instead of writing the yaml */
} Case;

static char tmp_dir[256], config_path[300], data_path[300]; /* in a fresh directory under $TMPDIR */
static int passed, failed;

static void report(const char *name, int ok, const char *got) {
    if (ok) passed++, printf("ok - %s\n", name);
    else failed++, printf("FAIL - %s: got '%s'\n", name, got);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(text, 1, strlen(text), f);
    fclose(f);
}

/* Copy text replacing each "@DATA@" with the data file path. */
static char *substitute(const char *text) {
    size_t size = strlen(text) * 2 + 4096;
    char *out = calloc(1, size), *o = out;
    for (const char *s = text; *s;) {
        if (!strncmp(s, "@DATA@", 6)) o += sprintf(o, "%s", data_path), s += 6;
        else *o++ = *s++;
    }
    return out;
}

static void run_case(const Case *c) {
    const char *path = c->path ? c->path : config_path;
    if (!c->path) {
        char *text = substitute(c->yaml);
        write_file(config_path, text);
        free(text);
    }
    Config cfg;
    UserError err = {0};
    int rc = config_load(&cfg, path, &err);
    for (int i = 0; i < 3 && c->sets[i] && rc == ERR_OK; i++) rc = config_set(&cfg, c->sets[i], &err);
    if (rc == ERR_OK) rc = config_resolve(&cfg, &err);
    if (rc == ERR_OK) rc = config_validate(&cfg, &err);

    if (!c->where) {
        int ok = rc == ERR_OK && (!c->check || c->check(&cfg));
        report(c->name, ok, rc == ERR_OK ? "wrong values" : err.text);
        return;
    }
    char prefix[512];
    if (!strncmp(c->where, "--set", 5)) snprintf(prefix, sizeof prefix, "%s: ", c->where);
    else snprintf(prefix, sizeof prefix, "%s:%s: ", path, c->where);
    int ok = rc == ERR_USER && !strncmp(err.text, prefix, strlen(prefix)) && strstr(err.text, c->expect) &&
             !strchr(err.text, '\n');
    report(c->name, ok, rc == ERR_OK ? "(no error)" : err.text);
}

/* ---- value checks for the valid cases ---- */

static int check_defaults(const Config *c) {
    return c->vocab_size == 64 && c->d_model == 96 && c->n_head == 12 && c->d_head == 8 && c->n_layer == 2 &&
           c->seq_len == 64 && c->steps == 2000 && c->batch_size == 32 && c->lr == 1e-3 &&
           c->min_lr_ratio == 0.1 && c->warmup_steps == 100 && c->lr_schedule == LR_COSINE &&
           c->weight_decay == 0.1 && c->beta1 == 0.9 && c->beta2 == 0.99 && c->eps == 1e-8 &&
           c->grad_clip == 1.0 && c->seed == 0 && c->threads == 0 && !c->init_from[0] &&
           c->task == TASK_INDUCTION && !c->data_path[0] && c->order == ORDER_RANDOM &&
           c->eval_fraction == 0.1 && c->min_period == 4 && c->max_period == 16 &&
           !strcmp(c->out_path, "results/run.h5") && c->log_every == 10 && c->eval_every == 100 &&
           c->eval_batches == 4 && c->attn_every == 0 && c->probes == 4 &&
           c->probe_len == 64 /* resolved: seq_len, its maps fit */ && c->n_probe_text == 1 &&
           !strcmp(c->probe_text[0], "The cat sat on the mat because it was");
}

static int check_full(const Config *c) {
    return c->vocab_size == 300 && c->d_model == 64 && c->n_head == 2 && c->d_head == 16 && c->n_layer == 3 &&
           c->seq_len == 128 && c->steps == 500 && c->batch_size == 8 && c->lr == 3e-4 &&
           c->min_lr_ratio == 0 && c->warmup_steps == 5000 && c->lr_schedule == LR_CONSTANT &&
           c->weight_decay == 0 && c->beta1 == 0 && c->beta2 == 0.95 && c->eps == 1e-6 && c->grad_clip == 0 &&
           c->seed == 4611686018427387904LL && c->threads == 3 && c->task == TASK_TEXT &&
           !strcmp(c->data_path, data_path) && c->order == ORDER_SEQUENTIAL && c->eval_fraction == 0.25 &&
           c->min_period == 2 && c->max_period == 2 && !strcmp(c->out_path, "out dir/run #1.h5") &&
           c->log_every == 1 && c->eval_every == 7 && c->eval_batches == 9 && c->attn_every == 50 &&
           c->probes == 1024 && c->probe_len == 128 && c->n_probe_text == 2 &&
           !strcmp(c->probe_text[0], "Hello") && !strcmp(c->probe_text[1], "a: \"b\"\n");
}

static int check_d_head_derived(const Config *c) { return c->d_head == 32; }
static int check_wide_heads(const Config *c) {
    return c->n_head == 24 && c->d_head == 256 && c->d_model == 5120;
}
static int check_steps_1e6(const Config *c) { return c->steps == 1000000 && c->batch_size == 2000; }
static int check_one_probe(const Config *c) {
    return c->n_probe_text == 1 && !strcmp(c->probe_text[0], "Once upon");
}
static int check_text_default(const Config *c) {
    return c->task == TASK_TEXT && !strcmp(c->data_path, "/usr/share/common-licenses/GPL-3");
}
static int check_overrides(const Config *c) {
    return c->n_head == 4 && c->d_head == 24 && c->lr == 3e-4 && !strcmp(c->out_path, "x.h5") &&
           c->d_model == 96;
}
static int check_set_list(const Config *c) {
    return c->n_probe_text == 2 && !strcmp(c->probe_text[0], "a b") && !strcmp(c->probe_text[1], "c") &&
           c->task == TASK_TWO_SOURCE;
}
static int check_nulls(const Config *c) { return !c->init_from[0] && !strcmp(c->out_path, "~"); }

static const Case CASES[] = {
    /* valid configs */
    {"empty sections keep defaults",
     "model:\ntrain:\ndata:\noutput:\n",
     {0},
     NULL,
     NULL,
     check_defaults,
     NULL},
    {"every key set",
     "model:\n  vocab_size: 300\n  d_model: 64\n  n_head: 2\n  d_head: 16\n  n_layer: 3\n"
     "  seq_len: 128\ntrain:\n  steps: 500\n  batch_size: 8\n  lr: 3e-4\n  min_lr_ratio: 0\n  warmup_steps: "
     "5000\n"
     "  lr_schedule: constant\n  weight_decay: 0\n  beta1: 0.0\n  beta2: 0.95\n  eps: 1.0e-6\n  grad_clip: "
     "0\n"
     "  seed: 4611686018427387904\n  threads: 3\n  init_from: \"\"\ndata:\n  task: text\n  path: '@DATA@'\n"
     "  order: sequential\n  eval_fraction: 0.25\n  min_period: 2\n  max_period: 2\noutput:\n"
     "  path: \"out dir/run #1.h5\"\n  log_every: 1\n  eval_every: 7\n  eval_batches: 9\n  attn_every: 50\n"
     "  probes: 1024\n  probe_len: 128\n  probe_text:\n    - Hello\n    - \"a: \\\"b\\\"\\n\"\n",
     {0},
     NULL,
     NULL,
     check_full,
     NULL},
    {"d_head derives from d_model / n_head",
     "model:\n  d_model: 128\n  n_head: 4\n",
     {0},
     NULL,
     NULL,
     check_d_head_derived,
     NULL},
    {"explicit d_head allows n_head*d_head != d_model",
     "model: {n_head: 24, d_head: 256, d_model: 5120}\n",
     {0},
     NULL,
     NULL,
     check_wide_heads,
     NULL},
    {"integers in exponent form",
     "train:\n  steps: 1e6\n  batch_size: 2E3\n",
     {0},
     NULL,
     NULL,
     check_steps_1e6,
     NULL},
    {"probe_text as one string",
     "output:\n  probe_text: Once upon\n",
     {0},
     NULL,
     NULL,
     check_one_probe,
     NULL},
    {"text task defaults data.path",
     "model:\n  vocab_size: 256\ndata:\n  task: text\n",
     {0},
     NULL,
     NULL,
     check_text_default,
     NULL},
    {"--set overrides",
     "model:\n  n_head: 12\n",
     {"model.n_head=4", "train.lr=3e-4", "output.path=x.h5"},
     NULL,
     NULL,
     check_overrides,
     NULL},
    {"--set a list and an enum",
     "model:\n",
     {"output.probe_text=[\"a b\", c]", "data.task=two_source"},
     NULL,
     NULL,
     check_set_list,
     NULL},
    {"null strings, quoted ~ is a string",
     "train:\n  init_from: ~\noutput:\n  path: \"~\"\n",
     {0},
     NULL,
     NULL,
     check_nulls,
     NULL},
    {"document markers and comments",
     "%YAML 1.1\n---\n# c\nmodel:   # c\n  n_head: 12   # c\n...\n",
     {0},
     NULL,
     NULL,
     check_defaults,
     NULL},

    /* the file as a whole */
    {"missing file",
     NULL,
     {0},
     "1:1",
     "cannot open the config: No such file or directory",
     NULL,
     "/nonexistent/config.yaml"},
    {"directory as config", NULL, {0}, "1:1", "cannot read the config: Is a directory", NULL, "/tmp"},
    {"empty file", "", {0}, "1:1", "the config is empty", NULL, NULL},
    {"comments only", "# nothing here\n\n", {0}, "1:1", "the config is empty", NULL, NULL},
    {"empty document", "---\n", {0}, "1:1", "the config is empty", NULL, NULL},
    {"two documents",
     "model:\n  n_head: 4\n---\ntrain:\n  steps: 1\n",
     {0},
     "3:1",
     "only one YAML document",
     NULL,
     NULL},
    {"top level scalar", "hello\n", {0}, "1:1", "top level must be a mapping of sections", NULL, NULL},
    {"top level list",
     "- model\n- train\n",
     {0},
     "1:1",
     "top level must be a mapping of sections (model:, train:, "
     "data:, output:), got a list",
     NULL,
     NULL},

    /* YAML syntax */
    {"unclosed quote",
     "model:\n  n_head: \"4\n",
     {0},
     "3:1",
     "YAML syntax error: found unexpected end of stream "
     "(while scanning a quoted scalar at line 2, column 11)",
     NULL,
     NULL},
    {"bad indentation",
     "model:\n  n_head: 4\n d_model: 8\n",
     {0},
     "3:2",
     "YAML syntax error: did not find expected key",
     NULL,
     NULL},
    {"tab indentation",
     "model:\n\tn_head: 4\n",
     {0},
     "2:1",
     "YAML does not allow tabs for indentation, use spaces",
     NULL,
     NULL},
    {"colon inside a value",
     "model:\n  n_head: a: b\n",
     {0},
     "2:12",
     "mapping values are not allowed",
     NULL,
     NULL},
    {"invalid UTF-8",
     "model:\n  n_head: 4\n  d_model: \xff\n",
     {0},
     "3:12",
     "invalid leading UTF-8 octet (byte 0xFF)",
     NULL,
     NULL},

    /* structure */
    {"section is a scalar",
     "model: 5\n",
     {0},
     "1:8",
     "section 'model' must be a mapping of 'key: value' lines, got a scalar",
     NULL,
     NULL},
    {"section is a list",
     "model:\n  - n_head\n",
     {0},
     "2:3",
     "section 'model' must be a mapping",
     NULL,
     NULL},
    {"unknown section, near typo",
     "modle:\n  n_head: 4\n",
     {0},
     "1:1",
     "unknown section 'modle' (did you mean 'model'? "
     "sections: model, train, data, output)",
     NULL,
     NULL},
    {"key at the top level",
     "model:\n  n_head: 4\nseq_len: 8\n",
     {0},
     "3:1",
     "'seq_len' is a key of section 'model', not a section",
     NULL,
     NULL},
    {"unknown key, near typo",
     "model:\n  n_heads: 4\n",
     {0},
     "2:3",
     "unknown key 'n_heads' in section 'model' (did you "
     "mean 'n_head'? known: vocab_size, d_model, n_head, d_head, n_layer, seq_len, n_kv_head, pos, "
     "rope_dims, rope_base, output_gate, sink)",
     NULL,
     NULL},
    {"unknown key, no suggestion",
     "train:\n  momentum: 0.9\n",
     {0},
     "2:3",
     "unknown key 'momentum' in section 'train' "
     "(known: steps,",
     NULL,
     NULL},
    {"key in the wrong section",
     "model:\n  lr: 0.1\n",
     {0},
     "2:3",
     "it belongs in section 'train'",
     NULL,
     NULL},
    {"duplicate key",
     "model:\n  n_head: 4\n  d_model: 8\n  n_head: 8\n",
     {0},
     "4:3",
     "duplicate key 'model.n_head' (first set at line 2)",
     NULL,
     NULL},
    {"duplicate section",
     "model:\n  n_head: 4\ntrain:\n  steps: 1\nmodel:\n  d_model: 8\n",
     {0},
     "5:1",
     "duplicate section 'model' (first at line 1)",
     NULL,
     NULL},
    {"mapping where a value belongs",
     "model:\n  n_head:\n    value: 4\n",
     {0},
     "3:5",
     "model.n_head must be a single value, got a mapping",
     NULL,
     NULL},
    {"list where a value belongs",
     "model:\n  n_head: [4, 8]\n",
     {0},
     "2:11",
     "model.n_head must be a single value, got a list",
     NULL,
     NULL},
    {"mapping as a key",
     "model:\n  ? {a: 1}\n  : 4\n",
     {0},
     "2:5",
     "a key must be a plain name, got a mapping",
     NULL,
     NULL},

    /* values */
    {"integer written as a word",
     "model:\n  n_head: twelve\n",
     {0},
     "2:11",
     "model.n_head must be an integer in [1, 4096], got 'twelve'",
     NULL,
     NULL},
    {"integer with trailing junk",
     "model:\n  n_head: 12abc\n",
     {0},
     "2:11",
     "must be an integer in [1, 4096], got '12abc'",
     NULL,
     NULL},
    {"hexadecimal integer containing an e",
     "model:\n  n_head: 0x1e\n",
     {0},
     "2:11",
     "must be an integer in [1, 4096], got '0x1e'",
     NULL,
     NULL},
    {"C hex float", "train:\n  lr: 0x1p-10\n", {0}, "2:7", "train.lr must be", NULL, NULL},
    {"integer given a fraction",
     "model:\n  n_layer: 2.5\n",
     {0},
     "2:12",
     "model.n_layer must be an integer in [1, 64]",
     NULL,
     NULL},
    {"integer left empty",
     "model:\n  n_head:\n  d_model: 8\n",
     {0},
     "2:10",
     "model.n_head must be an integer in [1, 4096], "
     "got nothing",
     NULL,
     NULL},
    {"integer overflow",
     "train:\n  seed: 99999999999999999999\n",
     {0},
     "2:9",
     "train.seed must be in [0, "
     "4611686018427387904], got '99999999999999999999'",
     NULL,
     NULL},
    {"integer out of range",
     "model:\n  n_head: 0\n",
     {0},
     "2:11",
     "model.n_head must be in [1, 4096], got '0'",
     NULL,
     NULL},
    {"range with a note",
     "model:\n  d_head: -1\n",
     {0},
     "2:11",
     "model.d_head must be in [0, 65536] (0 = d_model / n_head)",
     NULL,
     NULL},
    {"open-ended range",
     "output:\n  log_every: 0\n",
     {0},
     "2:14",
     "output.log_every must be >= 1, got '0'",
     NULL,
     NULL},
    {"float written as a word",
     "train:\n  lr: fast\n",
     {0},
     "2:7",
     "train.lr must be a finite number > 0, got 'fast'",
     NULL,
     NULL},
    {"float nan",
     "train:\n  lr: .nan\n",
     {0},
     "2:7",
     "train.lr must be a finite number > 0, got '.nan'",
     NULL,
     NULL},
    {"float nan (C spelling)",
     "train:\n  weight_decay: nan\n",
     {0},
     "2:17",
     "must be a finite number >= 0",
     NULL,
     NULL},
    {"float inf by overflow",
     "train:\n  lr: 1e999\n",
     {0},
     "2:7",
     "train.lr must be a finite number > 0",
     NULL,
     NULL},
    {"float below an open bound",
     "train:\n  lr: 0\n",
     {0},
     "2:7",
     "train.lr must be > 0, got '0'",
     NULL,
     NULL},
    {"float at a half-open bound",
     "train:\n  beta2: 1\n",
     {0},
     "2:10",
     "train.beta2 must be in [0, 1), got '1'",
     NULL,
     NULL},
    {"float outside an open interval",
     "data:\n  eval_fraction: 1.0\n",
     {0},
     "2:18",
     "data.eval_fraction must be in (0, 1), got '1.0'",
     NULL,
     NULL},
    {"bad enum",
     "data:\n  task: copying\n",
     {0},
     "2:9",
     "data.task must be one of induction, text, tokens, two_source; "
     "got 'copying'",
     NULL,
     NULL},
    {"enum is case-sensitive",
     "train:\n  lr_schedule: Cosine\n",
     {0},
     "2:16",
     "one of cosine, constant",
     NULL,
     NULL},
    {"NUL byte in a string",
     "output:\n  path: \"a\\0b\"\n",
     {0},
     "2:9",
     "output.path must not contain NUL bytes",
     NULL,
     NULL},
    {"too many probe texts",
     "output:\n  probe_text: [a, b, c, d, e, f, g, h, i]\n",
     {0},
     "2:40",
     "output.probe_text has too many entries; at most 8 are allowed",
     NULL,
     NULL},
    {"probe text entry not a string",
     "output:\n  probe_text:\n    - a\n    - {b: c}\n",
     {0},
     "4:7",
     "output.probe_text entries must be strings, got a mapping",
     NULL,
     NULL},
    {"empty probe text list",
     "output:\n  probe_text: []\n",
     {0},
     "2:15",
     "output.probe_text must list at least one string",
     NULL,
     NULL},
    {"probe text as a mapping",
     "output:\n  probe_text: {a: b}\n",
     {0},
     "2:15",
     "must be a single value, got a mapping (key: value pairs); use a string or a list of strings",
     NULL,
     NULL},
    {"anchor",
     "model:\n  n_head: &h 4\n  d_head: *h\n",
     {0},
     "2:11",
     "YAML anchors (&h) are not supported",
     NULL,
     NULL},
    {"alias", "model:\n  n_head: *h\n", {0}, "2:11", "YAML aliases (*h) are not supported", NULL, NULL},
    {"tag",
     "model:\n  n_head: !!int 4\n",
     {0},
     "2:11",
     "YAML tags (tag:yaml.org,2002:int) are not supported",
     NULL,
     NULL},

    /* cross-field rules, at the key most likely to be wrong */
    {"d_model not divisible, n_head default",
     "model:\n  d_model: 100\n",
     {0},
     "2:3",
     "d_model 100 is not divisible by n_head 12; set model.d_head to choose the head width explicitly",
     NULL,
     NULL},
    {"d_model not divisible, n_head set later",
     "model:\n  d_model: 100\n  n_head: 12\n",
     {0},
     "3:3",
     "d_model 100 is not divisible by n_head 12",
     NULL,
     NULL},
    {"d_model not divisible, d_model from --set",
     "model:\n  n_head: 12\n",
     {"model.d_model=100"},
     "--set:1:1",
     "d_model 100 is not divisible by n_head 12",
     NULL,
     NULL},
    {"text task needs bytes",
     "data:\n  task: text\n  path: '@DATA@'\n",
     {0},
     "2:3",
     "data.task text reads bytes, so model.vocab_size must be >= 256, got 64",
     NULL,
     NULL},
    {"text task, vocab set too small",
     "model:\n  vocab_size: 100\ndata:\n  task: text\n",
     {0},
     "2:3",
     "model.vocab_size must be >= 256, got 100",
     NULL,
     NULL},
    {"tokens task needs a path",
     "data:\n  task: tokens\n",
     {0},
     "2:3",
     "data.task tokens needs data.path",
     NULL,
     NULL},
    {"data.path missing",
     "model:\n  vocab_size: 256\ndata:\n  task: text\n  path: /nonexistent/corpus.txt\n",
     {0},
     "5:3",
     "data.path '/nonexistent/corpus.txt' cannot be read: No such file or directory",
     NULL,
     NULL},
    {"data.path is a directory",
     "data:\n  task: tokens\n  path: /tmp\n",
     {0},
     "3:3",
     "cannot be read: Is a directory",
     NULL,
     NULL},
    {"data.path is a device (refused before it is opened)",
     "data:\n  task: tokens\n  path: /dev/null\n",
     {0},
     "3:3",
     "cannot be read: it is a device, not a regular file",
     NULL,
     NULL},
    {"data.path unused by induction", "data:\n  path: /nonexistent\n", {0}, NULL, NULL, NULL, NULL},
    {"init_from missing",
     "train:\n  init_from: /nonexistent/run.h5\n",
     {0},
     "2:3",
     "train.init_from '/nonexistent/run.h5' cannot be read",
     NULL,
     NULL},
    {"heads_kept: a count per layer", "train:\n  heads_kept: \"3, 0\"\n", {0}, NULL, NULL, NULL, NULL},
    {"heads_kept: one count for two layers",
     "train:\n  heads_kept: \"3\"\n",
     {0},
     "2:3",
     "train.heads_kept '3' gives 1 head count for model.n_layer 2 layers",
     NULL,
     NULL},
    {"heads_kept: more than n_head",
     "train:\n  heads_kept: 3,13\n",
     {0},
     "2:3",
     "train.heads_kept '3,13': layer 1 keeps 13 heads, but a layer has 0 to n_head 12",
     NULL,
     NULL},
    {"heads_kept: not numbers",
     "train:\n  heads_kept: 3,x\n",
     {0},
     "2:3",
     "train.heads_kept '3,x' is not a comma-separated list of head counts",
     NULL,
     NULL},
    {"heads_kept: a trailing comma",
     "train:\n  heads_kept: 3,4,\n",
     {0},
     "2:3",
     "train.heads_kept '3,4,' ends with a comma",
     NULL,
     NULL},
    {"heads_kept: more layers than n_layer, set later",
     "train:\n  heads_kept: 3,4\n",
     {"model.n_layer=1"},
     "--set:1:1",
     "train.heads_kept '3,4' names more layers than model.n_layer 1",
     NULL,
     NULL},
    {"min_period above max_period",
     "data:\n  min_period: 20\n",
     {0},
     "2:3",
     "data.min_period 20 is larger than data.max_period 16",
     NULL,
     NULL},
    {"max_period below min_period, set later",
     "data:\n  min_period: 5\n  max_period: 4\n",
     {0},
     "3:3",
     "data.min_period 5 is larger than data.max_period 4",
     NULL,
     NULL},
    {"seq_len too short for two copies",
     "model:\n  seq_len: 8\n",
     {0},
     "2:3",
     "model.seq_len 8 is too short for data.min_period 4",
     NULL,
     NULL},
    {"seq_len exactly BOS + two copies", "model:\n  seq_len: 9\n", {0}, NULL, NULL, NULL, NULL},
    {"induction needs 3 symbols",
     "model:\n  vocab_size: 2\n",
     {0},
     "2:3",
     "model.vocab_size must be >= 3",
     NULL,
     NULL},
    {"probe_len longer than seq_len",
     "output:\n  probe_len: 65\n",
     {0},
     "2:3",
     "output.probe_len 65 is longer than "
     "model.seq_len 64",
     NULL,
     NULL},
    {"warmup may exceed steps", "train:\n  steps: 10\n  warmup_steps: 100\n", {0}, NULL, NULL, NULL, NULL},

    /* --set */
    {"--set without '='",
     "model:\n",
     {"model.n_head"},
     "--set:1:1",
     "'model.n_head': expected key=value, e.g. model.n_head=4 or n_head=4",
     NULL,
     NULL},
    {"--set bare keys of one section",
     "model:\n  n_head: 12\n",
     {"n_head=4", "lr=3e-4", "output.path=x.h5"},
     NULL,
     NULL,
     check_overrides,
     NULL},
    {"--set bare key of two sections",
     "model:\n",
     {"path=x.h5"},
     "--set:1:1",
     "'path=x.h5': 'path' is in several sections (data.path, output.path); write section.key",
     NULL,
     NULL},
    {"--set bare unknown key, near typo",
     "model:\n",
     {"n_haed=4"},
     "--set:1:1",
     "'n_haed=4': unknown config key 'n_haed' (did you mean 'n_head'?); write section.key",
     NULL,
     NULL},
    {"--set bare unknown key, no suggestion",
     "model:\n",
     {"momentum=0.9"},
     "--set:1:1",
     "unknown config key 'momentum'; write section.key, e.g. model.n_head or train.lr",
     NULL,
     NULL},
    {"--set bare key, bad value",
     "model:\n",
     {"n_head=twelve"},
     "--set:1:8",
     "'n_head=twelve': model.n_head must be an integer",
     NULL,
     NULL},
    {"--set empty key", "model:\n", {"=4"}, "--set:1:1", "unknown config key ''", NULL, NULL},
    {"--set unknown section",
     "model:\n",
     {"modl.n_head=4"},
     "--set:1:1",
     "unknown section 'modl' (did you mean 'model'?",
     NULL,
     NULL},
    {"--set unknown key",
     "model:\n",
     {"model.n_heads=4"},
     "--set:1:1",
     "'model.n_heads=4': unknown key 'n_heads' in section "
     "'model' (did you mean 'n_head'? known: vocab_size,",
     NULL,
     NULL},
    {"--set bad value",
     "model:\n",
     {"model.n_head=twelve"},
     "--set:1:14",
     "'model.n_head=twelve': model.n_head must be an integer",
     NULL,
     NULL},
    {"--set empty value",
     "model:\n",
     {"model.n_head="},
     "--set:1:14",
     "model.n_head must be an integer in [1, 4096], got nothing",
     NULL,
     NULL},
    {"--set value is a mapping",
     "model:\n",
     {"output.path=a: b"},
     "--set:1:13",
     "output.path must be a single value, got a mapping",
     NULL,
     NULL},
    {"--set YAML syntax error",
     "model:\n",
     {"output.probe_text=[a, b"},
     "--set:1:24",
     "'output.probe_text=[a, b': YAML syntax error: did not find expected ',' or ']' (while parsing a flow "
     "sequence "
     "at column 19)",
     NULL,
     NULL},
};

/* ---- tests that are not one load ---- */

static void collect(void *ctx, const char *section, const char *key, ConfigValueType type, int64_t ival,
                    double fval, const char *sval) {
    char *out = ctx;
    size_t len = strlen(out);
    if (type == CONFIG_INT || type == CONFIG_BOOL)
        snprintf(out + len, 16384 - len, "%s.%s=%lld\n", section, key, (long long)ival);
    if (type == CONFIG_FLOAT) snprintf(out + len, 16384 - len, "%s.%s=%a\n", section, key, fval);
    if (type == CONFIG_STRING) snprintf(out + len, 16384 - len, "%s.%s='%s'\n", section, key, sval);
}

/* Load, validate, dump, reload the dump: the values (as config_visit sees them) must match. */
static void test_round_trip(const char *name, const char *yaml, const char *set) {
    static char before[16384], after[16384];
    Config a, b;
    UserError err = {0};
    char *text = substitute(yaml);
    write_file(config_path, text);
    free(text);
    int rc = config_load(&a, config_path, &err);
    if (!rc && set) rc = config_set(&a, set, &err);
    if (!rc) rc = config_resolve(&a, &err);
    if (!rc) rc = config_validate(&a, &err);
    if (rc) {
        report(name, 0, err.text);
        return;
    }
    char *dump = config_to_yaml(&a);
    write_file(config_path, dump);
    rc = config_load(&b, config_path, &err);
    if (!rc) rc = config_resolve(&b, &err);
    if (!rc) rc = config_validate(&b, &err);
    char *dump2 = rc ? NULL : config_to_yaml(&b);
    before[0] = after[0] = '\0';
    config_visit(&a, collect, before);
    config_visit(&b, collect, after);
    report(name, !rc && !strcmp(before, after) && !strcmp(dump, dump2), rc ? err.text : dump);
    free(dump);
    free(dump2);
}

static void test_marks_and_visit(void) {
    Config cfg, copy;
    UserError err = {0};
    write_file(config_path, "model:\n  n_head: 4\n  d_model: 64\noutput:\n  probe_text: [x, y]\n");
    int rc = config_load(&cfg, config_path, &err);
    if (!rc) rc = config_set(&cfg, "train.lr=0.5", &err);
    ConfigMark m = config_mark(&cfg, "model.d_model");
    report("mark of a key from the file", !rc && m.line == 3 && m.col == 3 && !strcmp(m.file, config_path),
           err.text);
    m = config_mark(&cfg, "train.steps");
    report("mark of a default", m.line == 0 && !strcmp(m.file, config_path), "");
    m = config_mark(&cfg, "train.lr");
    report("mark of a --set", m.line > 0 && !strcmp(m.file, "--set") && cfg.lr == 0.5, m.file);
    rc = config_set(&cfg, "output.probe_text=[a, b, {c: d}]", &err);
    report("failed --set leaves the config unchanged",
           rc == ERR_USER && cfg.n_probe_text == 2 && !strcmp(cfg.probe_text[0], "x") &&
               !strcmp(cfg.probe_text[1], "y"),
           err.text);
    copy = cfg;
    memset(&cfg, 0, sizeof cfg); /* the copy's marks must not point into the old Config */
    m = config_mark(&copy, "model.n_head");
    report("mark survives copying the Config", m.line == 2 && m.file == copy.source_path, m.file);

    static char seen[16384];
    seen[0] = '\0';
    config_visit(&copy, collect, seen);
    int lines = 0;
    for (char *s = seen; *s; s++) lines += *s == '\n';
    report("visit sees every key with typed values",
           lines == config_n_keys + 1 /* every key of the table; probe_text's value spans 2 lines */ &&
               strstr(seen, "model.n_head=4\n") && strstr(seen, "output.prune_batches=1\n") &&
               strstr(seen, "train.lr=0x1p-1\n") && strstr(seen, "data.task='induction'\n") &&
               strstr(seen, "output.probe_text='x\ny'\n"),
           seen);
    report("task names",
           !strcmp(config_task_name(TASK_TWO_SOURCE), "two_source") &&
               !strcmp(config_task_name(TASK_TEXT), "text") &&
               !strcmp(config_task_name((TaskKind)99), "unknown"),
           "");

    config_defaults(&cfg);
    char *dump = config_to_yaml(&cfg);
    report("dump shows floats with a '.' and strings quoted",
           strstr(dump, "  eps: 1.0e-08\n") && strstr(dump, "  grad_clip: 1.0\n") &&
               strstr(dump, "  path: \"results/run.h5\"\n") && strstr(dump, "  task: induction\n"),
           dump);
    free(dump);
}

/* config_resolve fills every derived value once; config_validate changes nothing; resolving a
 * resolved config again changes nothing either. */
static void test_resolve(void) {
    Config cfg, before;
    UserError err = {0};
    write_file(config_path, "model:\n  n_head: 4\n  d_model: 64\n  pos: rope\ndata:\n  task: text\n");
    int rc = config_load(&cfg, config_path, &err);
    if (!rc) rc = config_set(&cfg, "model.vocab_size=256", &err);
    report("resolve: the loaded config leaves derived values at 0",
           !rc && cfg.d_head == 0 && cfg.n_kv_head == 0 && cfg.rope_dims == 0 && !cfg.data_path[0] &&
               !cfg.resolved,
           err.text);
    if (!rc) rc = config_resolve(&cfg, &err);
    report("resolve: d_head = d_model / n_head, n_kv_head = n_head, rope_dims = d_head, text data.path = the "
           "default",
           !rc && cfg.d_head == 16 && cfg.n_kv_head == 4 && cfg.rope_dims == 16 &&
               !strcmp(cfg.data_path, CONFIG_DEFAULT_TEXT_PATH) && cfg.resolved,
           err.text);
    before = cfg;
    if (!rc) rc = config_validate(&cfg, &err);
    report("validate: only checks (the Config is unchanged)", !rc && !memcmp(&before, &cfg, sizeof cfg),
           err.text);
    if (!rc) rc = config_resolve(&cfg, &err);
    report("resolve: a resolved config resolves to itself", !rc && !memcmp(&before, &cfg, sizeof cfg),
           err.text);
    static char keys[65536];
    FILE *out = fmemopen(keys, sizeof keys, "w");
    config_print_keys(out);
    fclose(out);
    report("--keys names the text task's default data file",
           strstr(keys, "data.path\t") && strstr(strstr(keys, "data.path\t"), CONFIG_DEFAULT_TEXT_PATH), "");
}

/* harness --keys KEY...: the rows of the named keys (bare or section.key) under the header, or one
 * error and nothing printed. */
static void test_named_keys(void) {
    char text[4096];
    UserError err;
    char *good[] = {"n_head", "train.lr", "data.path"};
    FILE *f = tmpfile();
    int rc = config_print_named_keys(f, 3, good, &err);
    size_t n = (rewind(f), fread(text, 1, sizeof text - 1, f));
    text[n] = '\0';
    fclose(f);
    report("--keys n_head train.lr data.path: the header and those three rows, in that order",
           rc == ERR_OK &&
               !strncmp(text, "key\ttype\tdefault\trange\tmeaning\nmodel.n_head\tint\t12\t", 51) &&
               strstr(text, "\ntrain.lr\tfloat\t") > strstr(text, "\nmodel.n_head") &&
               strstr(text, "\ndata.path\tstring\t") > strstr(text, "\ntrain.lr") &&
               !strstr(text, "output.path") && !strstr(text, "model.d_model"),
           text);
    char *bad[] = {"n_head", "path"};
    f = tmpfile();
    rc = config_print_named_keys(f, 2, bad, &err);
    long printed = ftell(f);
    fclose(f);
    report("--keys n_head path: the ambiguous key named with its sections, nothing printed",
           rc == ERR_USER && printed == 0 &&
               !strcmp(err.text,
                       "--keys: 'path' is in several sections (data.path, output.path); write section.key"),
           err.text);
}

static void test_long_strings(void) {
    static char yaml[4096], name[1400];
    char long_path[1100], long_probe[300];
    memset(long_path, 'a', sizeof long_path - 1), long_path[sizeof long_path - 1] = '\0';
    memset(long_probe, 'b', sizeof long_probe - 1), long_probe[sizeof long_probe - 1] = '\0';
    snprintf(yaml, sizeof yaml, "output:\n  path: %s\n", long_path);
    run_case(&(Case){"string too long",
                     yaml,
                     {0},
                     "2:9",
                     "output.path is too long (1099 bytes); at most 1023 bytes",
                     NULL,
                     NULL});
    snprintf(yaml, sizeof yaml, "output:\n  probe_text:\n    - ok\n    - %s\n", long_probe);
    run_case(&(Case){"probe text too long",
                     yaml,
                     {0},
                     "4:7",
                     "output.probe_text is too long (299 bytes); at most 255",
                     NULL,
                     NULL});
    snprintf(yaml, sizeof yaml, "output:\n  path: %.1023s\n", long_path);
    run_case(&(Case){"string of the maximum length", yaml, {0}, NULL, NULL, NULL, NULL});
    snprintf(name, sizeof name, "%s/%.1100s.yaml", tmp_dir, long_path);
    run_case(&(Case){"config path too long", NULL, {0}, "1:1", "the config path is too long", NULL, name});
}

int main(void) {
    const char *base = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : P_tmpdir;
    snprintf(tmp_dir, sizeof tmp_dir, "%.200s/test_config.XXXXXX", base);
    if (!mkdtemp(tmp_dir)) {
        perror("test_config: mkdtemp");
        return 1;
    }
    snprintf(config_path, sizeof config_path, "%s/config.yaml", tmp_dir);
    snprintf(data_path, sizeof data_path, "%s/data.txt", tmp_dir);
    write_file(data_path, "some text to train on\n");

    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
    test_long_strings();
    test_named_keys();
    test_marks_and_visit();
    test_resolve();
    test_round_trip("round trip of the defaults", "model:\n", NULL);
    test_round_trip(
        "round trip of awkward values",
        "model:\n  vocab_size: 1048576\n  d_model: 100\n  n_head: 3\n  d_head: 7\ntrain:\n"
        "  lr: 0.30000000000000004\n  min_lr_ratio: 0.1\n  eps: 4.9e-324\n  weight_decay: 1e300\n"
        "  beta1: 0.9999999999999999\n  seed: 4611686018427387904\n  init_from: '@DATA@'\n"
        "data:\n  task: tokens\n  path: \"@DATA@\"\noutput:\n  path: \"tab\\there \\\"q\\\" back\\\\slash\"\n"
        "  probe_text:\n    - \"caf\xc3\xa9 \\u2028 \\x85 \\x01 \\uFEFF \\U0001F600 \\r\\n\"\n    - '# not a "
        "comment'\n"
        "    - \"- [x]: {y}\"\n",
        "train.grad_clip=1.5e-7");

    remove(config_path);
    remove(data_path);
    rmdir(tmp_dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
