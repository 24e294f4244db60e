// evaluate.mjs: runs GGUF files in llama.cpp (node-llama-cpp's prebuilt CPU binaries) and prints
// what tests/test_llama.py compares with the harness, one JSON object per job, one per line.
//
// usage: node tests/llama/evaluate.mjs JOBS.json
//   JOBS: [{"model": "run.gguf", "context": N, "sequences": [[ids...], ...],
//           "greedy": {"prompt": [ids...], "n": N}, "texts": ["How are", ...]}, ...]
//   prints per job: {"vocab": V, "probabilities": [[[p_0 .. p_V-1] per position] per sequence],
//                    "greedy": [ids...], "tokenized": [[ids...] per text]}
// CPU only, F32 K/V cache, flash attention off, one thread; nothing is downloaded or built.
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const jobs = JSON.parse(readFileSync(process.argv[2], "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});

// the next-token probabilities after every position of ids, from an empty sequence
async function probabilities(sequence, ids, V) {
    await sequence.clearHistory();
    const out = await sequence.controlledEvaluate(ids.map((t) => [t, {generateNext: {probabilities: true}}]));
    return out.map((step) => {
        const p = new Array(V).fill(0);
        for (const [token, value] of step.next.probabilities) p[token] = value;
        return p;
    });
}

// n tokens chosen by llama.cpp's own sampler at its defaults (temperature 0: greedy)
async function greedy(sequence, prompt, n) {
    await sequence.clearHistory();
    const out = [];
    let input = prompt;
    for (let i = 0; i < n; i++) {
        const last = input.length - 1;
        const res = await sequence.controlledEvaluate(input.map((t, j) => j === last ? [t, {generateNext: {token: true}}] : t));
        out.push(res[last].next.token);
        input = [out[out.length - 1]];
    }
    return out;
}

for (const job of jobs) {
    const model = await llama.loadModel({modelPath: job.model, gpuLayers: 0});
    const context = await model.createContext({
        contextSize: job.context, sequences: 1, threads: 1, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const sequence = context.getSequence();
    const V = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    const result = {vocab: V, probabilities: [], greedy: [], tokenized: []};
    for (const ids of job.sequences ?? []) result.probabilities.push(await probabilities(sequence, ids, V));
    if (job.greedy) result.greedy = await greedy(sequence, job.greedy.prompt, job.greedy.n);
    for (const text of job.texts ?? []) result.tokenized.push(Array.from(model.tokenize(text)));
    process.stdout.write(JSON.stringify(result) + "\n");
    await context.dispose();
    await model.dispose();
}
