/* dataset_docs.c: the table of every dataset a results file holds (see dataset_docs.h).
 * The wording matches docs/results-format.md; shapes there are in config symbols.
 * Owns the wording of every dataset. Must not know: HDF5 calls, how values are computed. */
#include <stdio.h>
#include <string.h>
#include "dataset_docs.h"

typedef struct {
    const char *pattern; /* '#' matches a layer number */
    DatasetDoc doc;
} DocRow;

#define DIMS(...)                                                                                            \
    { __VA_ARGS__, NULL }

/* Datasets at fixed paths. */
static const DocRow ROWS[] = {
    {"/train/step",
     {"training step of each logged row (0-based; the row's loss is before that step's update)", "steps",
      DIMS("step"), "step", NULL}},
    {"/train/loss",
     {"training loss of that step's batch, before its update: mean cross-entropy over the "
      "positions the task marks",
      "nats", DIMS("step"), NULL, "/train/step"}},
    {"/train/lr",
     {"learning rate used at that step (warmup, then cosine or constant)", "1", DIMS("step"), NULL,
      "/train/step"}},
    {"/train/grad_norm",
     {"global L2 norm of all gradients at that step, before clipping", "nats", DIMS("step"), NULL,
      "/train/step"}},
    {"/train/elapsed_s",
     {"wall-clock seconds since training began, at the end of that step", "s", DIMS("step"), NULL,
      "/train/step"}},
    {"/eval/step",
     {"number of updates done when the held-out loss was measured", "steps", DIMS("evaluation"),
      "evaluation step", NULL}},
    {"/eval/loss",
     {"cross-entropy per scored position over the periodic evaluations' windows of the validation split "
      "(output.eval_batches batches, the same windows each time)",
      "nats", DIMS("evaluation"), NULL, "/eval/step"}},
    {"/eval/tokens", {"positions that evaluation scored", "tokens", DIMS("evaluation"), NULL, "/eval/step"}},
    {"/eval/loss_by_position",
     {"cross-entropy at each token index (the prediction of token t + 1 from tokens 0..t), mean over the "
      "windows' scored tokens there; NaN where none is scored",
      "nats", DIMS("evaluation", "position"), NULL, "/eval/step"}},
    {"/eval/position_tokens",
     {"tokens scored at each token index in every evaluation (the same windows each time)", "tokens",
      DIMS("position"), NULL, NULL}},
    {"/eval/icl_score",
     {"in-context-learning score: mean loss over positions late_first..late_end - 1 minus over "
      "early_first..early_end - 1 (attributes); NaN where not defined",
      "nats", DIMS("evaluation"), NULL, "/eval/step"}},
    {"/heldout/split",
     {"the held-out splits scored at the end of training: validation (what selections may read), then "
      "test (only reported)",
      "none", DIMS("split"), "split", NULL}},
    {"/heldout/loss",
     {"cross-entropy per scored position over the split's windows (output.final_eval_batches; "
      "0 = every window)",
      "nats", DIMS("split"), NULL, "/heldout/split"}},
    {"/heldout/tokens", {"positions scored", "tokens", DIMS("split"), NULL, "/heldout/split"}},
    {"/heldout/windows",
     {"windows (sequences) scored: the i-th of n is window floor(i * split_windows / n)", "sequences",
      DIMS("split"), NULL, "/heldout/split"}},
    {"/heldout/split_windows",
     {"windows the split holds: file tasks (tokens - 1) / seq_len, synthetic tasks "
      "data.heldout_sequences",
      "sequences", DIMS("split"), NULL, "/heldout/split"}},
    {"/heldout/source",
     {"file tasks: the key of the file the split is in (data.path, data.val_path, data.test_path); "
      "synthetic tasks: generator",
      "none", DIMS("split"), NULL, "/heldout/split"}},
    {"/heldout/first_token",
     {"file tasks: the split's first token in that file (window w starts at first_token + w * seq_len)",
      "tokens", DIMS("split"), NULL, "/heldout/split"}},
    {"/probe/tokens",
     {"the probe sequences the attention maps and pattern scores are measured on", "token id",
      DIMS("probe", "position"), NULL, NULL}},
    {"/probe/marked",
     {"synthetic tasks: 1 at the probe positions where the task takes its loss (two_source: the '=' "
      "queries; induction: the queries whose next token repeats), else 0",
      "1", DIMS("probe", "position"), NULL, NULL}},
    {"/probe/labels",
     {"text task: each probe's text (bytes as characters); tokens task with a tokenizer: "
      "each probe decoded to text",
      "none", DIMS("probe"), NULL, NULL}},
    {"/tokenizer/model",
     {"tokens task with data.tokenizer: the SentencePiece .model file the tokens were made "
      "with, byte for byte",
      "none", DIMS("byte"), NULL, NULL}},
    {"/tokenizer/pieces",
     {"the tokenizer's piece of each token id (U+2581 marks a word start; <0xNN> a byte)", "none",
      DIMS("token"), NULL, NULL}},
    {"/tokenizer/scores",
     {"the tokenizer's BPE score of each piece (higher merges first)", "1", DIMS("token"), NULL, NULL}},
    {"/tokenizer/type",
     {"SentencePiece type of each piece: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte", "none",
      DIMS("token"), NULL, NULL}},
    {"/attn/step",
     {"number of updates done when each attention snapshot was taken", "steps", DIMS("snapshot"),
      "snapshot step", NULL}},
    {"/attn/maps",
     {"attention weights P[query, key] of every head on every probe (softmax over keys, causal)", "1",
      DIMS("snapshot", "layer", "head", "probe", "query", "key"), NULL, "/attn/step"}},
    {"/scores/prev",
     {"previous-token score: mean over queries i >= 1 of P[i, i-1]", "1", DIMS("snapshot", "layer", "head"),
      NULL, "/attn/step"}},
    {"/scores/self",
     {"self score: mean over queries i >= 1 of P[i, i]", "1", DIMS("snapshot", "layer", "head"), NULL,
      "/attn/step"}},
    {"/scores/first",
     {"first-token score: mean over queries i >= 1 of P[i, 0]", "1", DIMS("snapshot", "layer", "head"), NULL,
      "/attn/step"}},
    {"/scores/induction",
     {"induction score: mean over repeated-token queries i of the sum over earlier "
      "occurrences j of P[i, j+1]",
      "1", DIMS("snapshot", "layer", "head"), NULL, "/attn/step"}},
    {"/scores/duplicate",
     {"duplicate-token score: mean over repeated-token queries i of the sum over earlier "
      "occurrences j of P[i, j]",
      "1", DIMS("snapshot", "layer", "head"), NULL, "/attn/step"}},
    {"/scores/class",
     {"class of each head at the last snapshot: the pattern scoring above 0.5 (the highest), "
      "else mixed",
      "none", DIMS("layer", "head"), NULL, NULL}},
    {"/scores/marked_class",
     {"synthetic tasks: class of each head at the last snapshot over only the queries the task marks (its "
      "loss rows: two_source's '=' queries, induction's repeats): marked_top where marked_score > 0.5, "
      "else mixed",
      "none", DIMS("layer", "head"), NULL, NULL}},
    {"/scores/marked_top",
     {"synthetic tasks: the highest score at the marked queries: a pattern above, or 'k back' (the mean "
      "weight on the key k >= 2 positions back, the best k)",
      "none", DIMS("layer", "head"), NULL, NULL}},
    {"/scores/marked_score",
     {"synthetic tasks: marked_top's score, a mean over the marked queries (induction and duplicate over "
      "those whose token occurred before)",
      "1", DIMS("layer", "head"), NULL, NULL}},
    {"/heads/ablation_delta",
     {"held-out loss with the head's output zeroed minus the loss with every head on", "nats",
      DIMS("layer", "head"), NULL, NULL}},
    {"/heads/importance",
     {"Michel et al. (2019) importance: mean over held-out batches of |d loss / d gate| "
      "at gate 1",
      "nats", DIMS("layer", "head"), NULL, NULL}},
    {"/heads/importance_normalized",
     {"importance divided by the L2 norm of its layer's importances", "1", DIMS("layer", "head"), NULL,
      NULL}},
    {"/prune/importance/order",
     {"pruning curve by Michel et al. importance normalised per layer: heads in the order removed, as layer "
      "* n_head + head",
      "none", DIMS("removal"), NULL, NULL}},
    {"/prune/importance/heads_left",
     {"pruning curve by Michel et al. importance normalised per layer: heads left at each point (all, then "
      "fewer by the step, to 0)",
      "1", DIMS("point"), NULL, NULL}},
    {"/prune/importance/eval_loss",
     {"pruning curve by Michel et al. importance normalised per layer: held-out loss with those heads left "
      "(the rest zero-ablated); [0] is the unpruned model",
      "nats", DIMS("point"), NULL, NULL}},
    {"/prune/delta_loss/order",
     {"pruning curve by measured single-head delta loss: heads in the order removed, as layer * n_head + "
      "head",
      "none", DIMS("removal"), NULL, NULL}},
    {"/prune/delta_loss/heads_left",
     {"pruning curve by measured single-head delta loss: heads left at each point (all, then fewer by the "
      "step, to 0)",
      "1", DIMS("point"), NULL, NULL}},
    {"/prune/delta_loss/eval_loss",
     {"pruning curve by measured single-head delta loss: held-out loss with those heads left (the rest "
      "zero-ablated); [0] is the unpruned model",
      "nats", DIMS("point"), NULL, NULL}},
    {"/heads/ablation_delta_mean",
     {"held-out loss with the head's output replaced by its mean over every held-out "
      "token minus the loss with every head on",
      "nats", DIMS("layer", "head"), NULL, NULL}},
    {"/patching/clean_tokens",
     {"activation patching: the clean inputs, the run's held-out batches 0 ... output.patch_batches - 1",
      "token id", DIMS("sequence", "position"), NULL, NULL}},
    {"/patching/corrupt_tokens",
     {"activation patching: each clean input corrupted (induction: every token after the segment's first "
      "copy re-drawn; two_source: one source per group changed; text, tokens: another held-out window)",
      "token id", DIMS("sequence", "position"), NULL, NULL}},
    {"/patching/positions",
     {"activation patching: 1 where the metric reads (the task marks the position and the inputs up to it "
      "differ between clean and corrupted), else 0",
      "1", DIMS("sequence", "position"), NULL, NULL}},
    {"/patching/clean_answer",
     {"activation patching: the clean sequence's next token, the loss's target (and the right answer of "
      "one-answer tasks)",
      "token id", DIMS("sequence", "position"), NULL, NULL}},
    {"/patching/corrupt_answer",
     {"activation patching, one-answer tasks: the corrupted sequence's next token", "token id",
      DIMS("sequence", "position"), NULL, NULL}},
    {"/patching/head_out",
     {"normalised effect (m_patched - m_corrupt) / (m_clean - m_corrupt) of the head's output (hook_z) "
      "taken from the clean run into the corrupted one",
      "1", DIMS("layer", "head"), NULL, NULL}},
    {"/patching/q",
     {"normalised effect of the head's query (its Q columns of hook_qkv) taken from the clean run", "1",
      DIMS("layer", "head"), NULL, NULL}},
    {"/patching/k",
     {"normalised effect of the K/V head's key (its K columns of hook_qkv, read by every query head of its "
      "group) taken from the clean run",
      "1", DIMS("layer", "kv_head"), NULL, NULL}},
    {"/patching/v",
     {"normalised effect of the K/V head's value (its V columns of hook_qkv) taken from the clean run", "1",
      DIMS("layer", "kv_head"), NULL, NULL}},
    {"/patching/pattern",
     {"normalised effect of the head's attention pattern taken from the clean run (its output P_clean V)",
      "1", DIMS("layer", "head"), NULL, NULL}},
    {"/patching/path_q",
     {"path patching: normalised effect of sender head A's clean-minus-corrupted output (through its W_O) "
      "added to receiver head B's query input alone, every other head corrupted; NaN unless A's layer is "
      "earlier and both took part (/patching/path_heads)",
      "1", DIMS("receiver layer", "receiver head", "sender layer", "sender head"), NULL, NULL}},
    {"/patching/path_k",
     {"path patching to the key input of receiver K/V head B (read by every query head of its group), as "
      "/patching/path_q",
      "1", DIMS("receiver layer", "receiver kv_head", "sender layer", "sender head"), NULL, NULL}},
    {"/patching/path_v",
     {"path patching to the value input of receiver K/V head B, as /patching/path_q", "1",
      DIMS("receiver layer", "receiver kv_head", "sender layer", "sender head"), NULL, NULL}},
    {"/patching/path_heads",
     {"1 where the head took part in path patching (every head, or the output.path_patch_heads of each "
      "layer with the largest |/patching/head_out| in it)",
      "1", DIMS("layer", "head"), NULL, NULL}},
    {"/patching/atp_head_out",
     {"attribution-patching estimate of /patching/head_out: -(d m / d gate) / (m_clean - m_corrupt) on the "
      "corrupted run, gate 1 the corrupted value, 0 the clean one",
      "1", DIMS("layer", "head"), NULL, NULL}},
    {"/patching/atp_q",
     {"attribution-patching estimate of /patching/q", "1", DIMS("layer", "head"), NULL, NULL}},
    {"/patching/atp_k",
     {"attribution-patching estimate of /patching/k", "1", DIMS("layer", "kv_head"), NULL, NULL}},
    {"/patching/atp_v",
     {"attribution-patching estimate of /patching/v", "1", DIMS("layer", "kv_head"), NULL, NULL}},
    {"/patching/atp_pattern",
     {"attribution-patching estimate of /patching/pattern", "1", DIMS("layer", "head"), NULL, NULL}},
    {"/prune/one_head_per_layer/delta_loss",
     {"delta loss when the layer keeps only this head (its other heads ablated), "
      "on the first output.prune_batches held-out batches",
      "nats", DIMS("layer", "head"), NULL, NULL}},
    {"/prune/one_head_per_layer/best_head",
     {"per layer the head whose delta_loss is lowest", "none", DIMS("layer"), NULL, NULL}},
    {"/prune/one_head_per_layer/best_delta_loss",
     {"per layer the delta loss of keeping only best_head, on every "
      "held-out batch",
      "nats", DIMS("layer"), NULL, NULL}},
    {"/circuits/q_composition",
     {"Q-composition |W_OV(A) W_QK(B)| / (|W_OV(A)| |W_QK(B)|) of later head B reading "
      "earlier head A (LayerNorm folded); NaN unless A's layer is earlier",
      "1", DIMS("later layer", "later head", "earlier layer", "earlier head"), NULL, NULL}},
    {"/circuits/k_composition",
     {"K-composition |W_OV(A) W_QK(B)^T| / (|W_OV(A)| |W_QK(B)|) of later head B reading "
      "earlier head A (LayerNorm folded); NaN unless A's layer is earlier",
      "1", DIMS("later layer", "later head", "earlier layer", "earlier head"), NULL, NULL}},
    {"/circuits/v_composition",
     {"V-composition |W_OV(A) W_OV(B)| / (|W_OV(A)| |W_OV(B)|) of later head B reading "
      "earlier head A (LayerNorm folded); NaN unless A's layer is earlier",
      "1", DIMS("later layer", "later head", "earlier layer", "earlier head"), NULL, NULL}},
    {"/scores/copying",
     {"OV copying score Re(sum of eigenvalues) / sum of |eigenvalues| of the full OV circuit "
      "W_E W_V W_O W_U (LayerNorm folded, unembedding centred): 1 for a head that copies tokens",
      "1", DIMS("layer", "head"), NULL, NULL}},
    {"/dla/head",
     {"direct logit attribution: the head's write z_h W_O^h through the final LayerNorm (its scale "
      "frozen at the clean run's, centred over D) dotted with the target's unembedding column, mean "
      "over the patching set's marked positions",
      "nats", DIMS("layer", "head"), NULL, NULL}},
    {"/dla/bias_o",
     {"direct logit attribution of each layer's output bias b_o (same readout and mean as /dla/head)", "nats",
      DIMS("layer"), NULL, NULL}},
    {"/dla/embed",
     {"direct logit attribution of the embedding h0 (token, and learned position; same readout and mean)",
      "nats", DIMS("value"), NULL, NULL}},
    {"/dla/ln_bias",
     {"direct logit attribution of the final LayerNorm's bias: lnf_b W_U[:, target], same mean", "nats",
      DIMS("value"), NULL, NULL}},
    {"/dla/logit",
     {"the model's logit of the target, mean over the same positions: embed + sum of bias_o + sum of head "
      "+ ln_bias",
      "nats", DIMS("value"), NULL, NULL}},
    {"/gates/step",
     {"train.head_l0: training step of each row of the gate trajectory (the rows of /train/step)", "steps",
      DIMS("step"), "gate step", NULL}},
    {"/gates/p_open",
     {"train.head_l0: P(gate != 0) of each head's Hard Concrete gate at that step, before its update", "1",
      DIMS("step", "layer", "head"), NULL, "/gates/step"}},
    {"/heads/kept",
     {"train.head_l0: 1 where the head is open at the end (P(gate != 0) > 1/2), 0 where it is "
      "closed (its rows of W_o zeroed in /params)",
      "none", DIMS("layer", "head"), NULL, NULL}},
    {"/snapshots/step",
     {"output.snapshots: updates done when the weights of each snapshot were kept", "steps", DIMS("snapshot"),
      "snapshot step", NULL}},
    {"/batch/inputs",
     {"--dump-grads: input tokens of the first training batch", "token id", DIMS("batch", "position"), NULL,
      NULL}},
    {"/batch/targets",
     {"--dump-grads: next-token targets of the first training batch", "token id", DIMS("batch", "position"),
      NULL, NULL}},
    {"/batch/mask",
     {"--dump-grads: 1 where the position counts in the loss, else 0", "1", DIMS("batch", "position"), NULL,
      NULL}},
};

/* Model tensors, below each of the groups in GROUPS. */
static const DocRow TENSORS[] = {
    {"tok_emb", {"token embedding W_tok", "1", DIMS("vocab", "d_model"), NULL, NULL}},
    {"pos_emb",
     {"learned position embedding W_pos (pos learned or shortformer only)", "1", DIMS("position", "d_model"),
      NULL, NULL}},
    {"layer#/ln_g", {"LayerNorm gain of the block", "1", DIMS("d_model"), NULL, NULL}},
    {"layer#/ln_b", {"LayerNorm bias of the block", "1", DIMS("d_model"), NULL, NULL}},
    {"layer#/w_qkv",
     {"fused Q|K|V projection W_qkv; columns: H query heads, then H_kv key heads, then H_kv "
      "value heads, d_head each",
      "1", DIMS("d_model", "qkv"), NULL, NULL}},
    {"layer#/b_qkv", {"bias of the Q|K|V projection", "1", DIMS("qkv"), NULL, NULL}},
    {"layer#/w_o",
     {"output projection W_o from the concatenated heads", "1", DIMS("head_concat", "d_model"), NULL, NULL}},
    {"layer#/b_o", {"bias of the output projection", "1", DIMS("d_model"), NULL, NULL}},
    {"layer#/w_gate",
     {"output gate W_gate: O_cat times sigmoid(z W_gate + b_gate)", "1", DIMS("d_model", "head_concat"), NULL,
      NULL}},
    {"layer#/b_gate", {"bias of the output gate", "1", DIMS("head_concat"), NULL, NULL}},
    {"layer#/sink",
     {"attention-sink logit of each head, added to every softmax denominator as exp(sink)", "1", DIMS("head"),
      NULL, NULL}},
    {"log_alpha",
     {"train.head_l0: location log alpha of each head's Hard Concrete gate", "1", DIMS("layer", "head"), NULL,
      NULL}},
    {"lnf_g", {"final LayerNorm gain", "1", DIMS("d_model"), NULL, NULL}},
    {"lnf_b", {"final LayerNorm bias", "1", DIMS("d_model"), NULL, NULL}},
    {"w_unembed",
     {"unembedding W_unembed (logits = LN_f(h) W_unembed)", "1", DIMS("d_model", "vocab"), NULL, NULL}},
};

static const struct {
    const char *group, *prefix, *units, *steps; /* steps: a leading axis indexed by this scale */
} GROUPS[] = {
    {"/params/", "", NULL, NULL},
    {"/snapshots/params/", "output.snapshots: at each /snapshots/step, the ", "1", "/snapshots/step"},
    {"/grads/", "--dump-grads: gradient of the first batch's loss with respect to the ", "nats", NULL},
    {"/checkpoint/adam_m/", "AdamW first moment (running mean of the gradient) of the ", "nats", NULL},
    {"/checkpoint/adam_v/", "AdamW second moment (running mean of the squared gradient) of the ", "nats^2",
     NULL},
};

/* Whether path matches pattern, '#' standing for one or more digits. */
static int matches(const char *pattern, const char *path) {
    while (*pattern) {
        if (*pattern == '#') {
            if (*path < '0' || *path > '9') return 0;
            while (*path >= '0' && *path <= '9') path++;
            pattern++;
        } else if (*pattern++ != *path++) return 0;
    }
    return *path == '\0';
}

/* "/study_steps/<step>/rest": the study at one snapshot, described as the end-of-run dataset
 * "/rest", its scale the one under the same group. */
static const DatasetDoc *study_step_doc(const char *path, DatasetDoc *buf, char *text, int size) {
    const char *p = path + strlen("/study_steps/"), *rest = p;
    while (*rest >= '0' && *rest <= '9') rest++;
    if (rest == p || *rest != '/') return NULL;
    const DatasetDoc *doc = dataset_doc(rest, buf, text, size);
    if (!doc) return NULL;
    if (doc != buf) *buf = *doc;
    if (buf->attach) { /* after the description the lookup may have composed into text */
        size_t used = doc == buf ? strlen(text) + 1 : 0;
        char *attach = text + used;
        snprintf(attach, (size_t)size - used, "%.*s%s", (int)(rest - path), path, buf->attach);
        buf->attach = attach;
    }
    return buf;
}

const DatasetDoc *dataset_doc(const char *path, DatasetDoc *buf, char *text, int size) {
    if (!strncmp(path, "/study_steps/", strlen("/study_steps/")))
        return study_step_doc(path, buf, text, size);
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++)
        if (matches(ROWS[i].pattern, path)) return &ROWS[i].doc;
    for (size_t g = 0; g < sizeof GROUPS / sizeof GROUPS[0]; g++) {
        size_t n = strlen(GROUPS[g].group);
        if (strncmp(path, GROUPS[g].group, n) != 0) continue;
        for (size_t i = 0; i < sizeof TENSORS / sizeof TENSORS[0]; i++) {
            if (!matches(TENSORS[i].pattern, path + n)) continue;
            if (!GROUPS[g].units) return &TENSORS[i].doc;
            *buf = TENSORS[i].doc;
            if (GROUPS[g].steps) { /* the tensor's labels after the step axis */
                buf->dims[0] = "snapshot";
                for (int d = 0; TENSORS[i].doc.dims[d]; d++) buf->dims[d + 1] = TENSORS[i].doc.dims[d];
                buf->dims[DATASET_MAX_DIMS] = NULL;
                buf->attach = GROUPS[g].steps;
            }
            snprintf(text, (size_t)size, "%s%s", GROUPS[g].prefix, TENSORS[i].doc.description);
            buf->description = text;
            buf->units = GROUPS[g].units;
            return buf;
        }
    }
    return NULL;
}
