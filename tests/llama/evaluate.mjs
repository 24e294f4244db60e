// evaluate.mjs: runs a GGUF file in llama.cpp (through node-llama-cpp's prebuilt CPU binaries) and
// prints what tests/test_llama.py compares with the harness, as one JSON object.
//
// usage: node tests/llama/evaluate.mjs REQUEST.json
//   REQUEST: {"model": "run.gguf", "context": N, "sequences": [[ids...], ...],
//             "greedy": {"prompt": [ids...], "n": N}, "texts": ["How are", ...]}
//   prints:  {"probabilities": [[[p_0 .. p_V-1] per position] per sequence],
//             "greedy": [ids...], "tokenized": [[ids...] per text], "vocab": V}
// CPU only, F32 K/V cache, flash attention off, one thread; nothing downloaded or built.
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: request.model, gpuLayers: 0});
const context = await model.createContext({
    contextSize: request.context, sequences: 1, threads: 1, flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});
const V = model.tokens.vocabSize ?? model.fileInsights.vocabSize;
const sequence = context.getSequence();

// the next-token probabilities after every position of ids (a fresh sequence state each time)
async function probabilities(ids) {
    await sequence.clearHistory();
    const items = ids.map((t) => [t, {generateNext: {probabilities: true}}]);
    const out = await sequence.controlledEvaluate(items);
    return out.map((step) => {
        const p = new Array(V).fill(0);
        for (const [token, value] of step.next.probabilities) p[token] = value;
        return p;
    });
}

// greedy continuation by llama.cpp's own sampler (temperature 0: the most likely token)
async function greedy(prompt, n) {
    await sequence.clearHistory();
    const out = [];
    let input = prompt;
    for (let i = 0; i < n; i++) {
        const items = input.map((t, j) => j === input.length - 1 ? [t, {generateNext: {token: true}}] : t);
        const res = await sequence.controlledEvaluate(items);
        const next = res[res.length - 1].next.token;
        out.push(next);
        input = [next];
    }
    return out;
}

const result = {vocab: V, probabilities: [], greedy: [], tokenized: []};
for (const ids of request.sequences ?? []) result.probabilities.push(await probabilities(ids));
if (request.greedy) result.greedy = await greedy(request.greedy.prompt, request.greedy.n);
for (const text of request.texts ?? []) result.tokenized.push(Array.from(model.tokenize(text)));
process.stdout.write(JSON.stringify(result) + "\n");
await context.dispose();
await model.dispose();
