"""`nibble dequant IN.gguf OUT/ --hf` writes tokenizer.json and
tokenizer_config.json rebuilt from the GGUF's tokenizer.ggml.* metadata.

The test writes small GGUF models whose vocabularies it trains itself — a
SentencePiece-style one (tokenizer.ggml.model "llama": scores, byte
tokens, control and user-defined tokens, characters left to byte fallback)
and byte-level BPE ones ("gpt2" with the pre-tokenizers "llama-bpe" and
"qwen2") — and tokenizes sample strings three ways:
  1. llama.cpp's algorithms (llama-vocab.cpp: SentencePiece bigrams by
     score, BPE by merge rank after the pre-tokenizer's regex split), read
     straight from the GGUF metadata: the reference;
  2. a reader of the tokenizer.json nibble wrote (Hugging Face tokenizers'
     semantics: added tokens, normalizer, pre-tokenizer, BPE model,
     template post-processor);
  3. when node and npm are available, Hugging Face's own tokenizers.js
     (npm @huggingface/tokenizers) on the written files.
Token ids must be equal. Metadata nibble cannot reproduce writes the
weights without a tokenizer and says why.
Usage: test_hf_tokenizer.py NIBBLE_CLI WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import regex
except ImportError as e:
    print("SKIP: %s (python3-numpy and python3-regex are needed by %s)" % (e, sys.executable))
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_util import (kv_bool, kv_f32, kv_f32s, kv_i32s, kv_str, kv_strs,  # noqa: E402
                       kv_u32, write_gguf)

cli, work = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

# ---------------------------------------------------------------- the model


def llama_model(path, n_vocab, tok_kvs):
    """A complete one-layer llama GGUF (hidden 8, 2 heads) with `tok_kvs`."""
    rng = np.random.default_rng(1)
    h, ffn = 8, 16
    w = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    tensors = [("token_embd.weight", w(n_vocab, h)), ("output_norm.weight", w(h))]
    for name, shape in [("attn_norm", (h,)), ("attn_q", (h, h)), ("attn_k", (h, h)),
                        ("attn_v", (h, h)), ("attn_output", (h, h)), ("ffn_norm", (h,)),
                        ("ffn_gate", (ffn, h)), ("ffn_up", (ffn, h)), ("ffn_down", (h, ffn))]:
        tensors.append(("blk.0.%s.weight" % name, w(*shape)))
    kvs = [kv_str("general.architecture", "llama"), kv_u32("llama.embedding_length", h),
           kv_u32("llama.feed_forward_length", ffn), kv_u32("llama.block_count", 1),
           kv_u32("llama.context_length", 96), kv_u32("llama.attention.head_count", 2),
           kv_u32("llama.attention.head_count_kv", 2),
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
           kv_f32("llama.rope.freq_base", 10000.0)] + tok_kvs
    write_gguf(path, kvs, tensors)


def convert(name, gguf):
    out = os.path.join(work, name)
    r = subprocess.run([cli, "dequant", gguf, out, "--hf"], capture_output=True, text=True)
    return r, out


# ---------------------------------------------------------------- vocabularies

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! Hello there, world of tokens and tokenizers.",
    "don't stop believing; I'LL be there at 12:30 with 1234567 apples",
    "the theory of the thing: then there they were, these three thinkers",
    "   indented    code\n\n  with\ttabs and newlines\r\n done",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u4f60\u597d\u4e16\u754c",
]
SAMPLES = [
    "", "Hello world", " Hello  world ", "The quick brown fox.", "don't DON'T you'll",
    "12345 and 1234567", "theory thinkers there", "caf\u00e9 qu\u00f6 zq", "\u4f60\u597d",
    "line one\nline two\n\n  spaced   out\t", "a<|im_end|>b <|user|> c", "<|user|>",
    "x<|im_end|>", "emoji \U0001F642 ok", "  ", "\n",
]

SPACE = "\u2581"


def train_bpe(words, merges_wanted):
    """Greedy BPE on `words` (lists of symbols): merges by frequency."""
    words = [list(w) for w in words]
    merges = []
    for _ in range(merges_wanted):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        best = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if (w[i], w[i + 1]) == best:
                    w[i:i + 2] = [w[i] + w[i + 1]]
                i += 1
    return merges


def spm_vocab():
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    words = []
    for line in CORPUS:
        for w in line.split():
            words.append(SPACE + w)
    chars = sorted({c for w in words for c in w} - {"q"})  # 'q' falls back to bytes
    for c in chars:
        tokens.append(c)
        types.append(1)
        scores.append(-1000.0 - len(tokens))
    words = [w for w in words if "q" not in w]
    for rank, (a, b) in enumerate(train_bpe(words, 120)):
        if a + b in tokens:
            continue
        tokens.append(a + b)
        types.append(1)
        scores.append(-float(rank))
    for t, ty in [("<|im_end|>", 3), ("<|user|>", 4)]:
        tokens.append(t)
        types.append(ty)
        scores.append(0.0)
    return tokens, scores, types


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = bytes_to_unicode()


def byte_encode(s):
    return "".join(BYTE_CHARS[b] for b in s.encode())


PRE_REGEX = {  # the regexes llama.cpp's llm_tokenizer_bpe uses for these pre types
    "llama-bpe": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?"
                  r"\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen2": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?"
              r"\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
}


def regex_split(pieces, pattern):
    """Each match and each gap between matches a piece of its own."""
    out = []
    for p in pieces:
        last = 0
        for m in regex.finditer(pattern, p):
            if m.start() > last:
                out.append(p[last:m.start()])
            if m.end() > m.start():
                out.append(m.group())
            last = m.end()
        if last < len(p):
            out.append(p[last:])
    return out


def bpe_vocab(pre):
    tokens = [BYTE_CHARS[b] for b in range(256)]
    words = []
    for line in CORPUS:
        pieces = [line]
        for p in PRE_REGEX[pre]:
            pieces = regex_split(pieces, p)
        words += [byte_encode(p) for p in pieces]
    merges = []
    for a, b in train_bpe(words, 150):
        if a + b not in tokens:
            tokens.append(a + b)
        merges.append(a + " " + b)
    # A word in the vocabulary that no merge produces: one token only where
    # the pre-tokenizer ignores merges (llama-bpe).
    tokens.append(byte_encode(" zq"))
    types = [1] * len(tokens)
    for t, ty in [("<|begin_of_text|>", 3), ("<|end_of_text|>", 3), ("<|im_end|>", 3),
                  ("<|user|>", 4)]:
        tokens.append(t)
        types.append(ty)
    return tokens, merges, types


# ---------------------------------------------------------------- 1. llama.cpp's algorithms


def partition(text, tokens, types):
    """llama.cpp's tokenizer_st_partition (parse_special): control, user-
    defined and unknown tokens, longest first, cut out of the raw text."""
    specials = sorted((i for i, t in enumerate(types) if t in (2, 3, 4)),
                      key=lambda i: -len(tokens[i]))
    frags = [("text", text)] if text else []
    for sid in specials:
        s = tokens[sid]
        out = []
        for kind, v in frags:
            if kind != "text":
                out.append((kind, v))
                continue
            parts = v.split(s)
            for k, p in enumerate(parts):
                if k:
                    out.append(("token", sid))
                if p:
                    out.append(("text", p))
        frags = out
    return frags


def merge_pairs(syms, key):
    """Merges the adjacent pair with the smallest key(left, right) (None: not
    mergeable), the leftmost on a tie, until no pair is left: SentencePiece's
    bigram loop with key -score, BPE's with key rank."""
    while True:
        best = None
        for i in range(len(syms) - 1):
            k = key(syms[i], syms[i + 1])
            if k is not None and (best is None or k < best[0]):
                best = (k, i)
        if best is None:
            return syms
        i = best[1]
        syms[i:i + 2] = [syms[i] + syms[i + 1]]


def spm_session(text, ids, scores):
    """llm_tokenizer_spm_session::tokenize."""
    # The highest-scoring pair that is a vocabulary piece first.
    syms = merge_pairs(list(text), lambda a, b: -scores[ids[a + b]] if a + b in ids else None)
    out = []
    for s in syms:
        if s in ids:
            out.append(ids[s])
        else:
            out += [ids["<0x%02X>" % b] for b in s.encode()]
    return out


def bpe_session(word, ids, ranks, ignore_merges):
    """llm_tokenizer_bpe_session::tokenize for one pre-tokenized word."""
    if ignore_merges and word in ids:
        return [ids[word]]
    syms = merge_pairs(list(word), lambda a, b: ranks.get((a, b)))
    out = []
    for s in syms:
        if s in ids:
            out.append(ids[s])
        else:
            out += [ids[c] for c in s]
    return out


def llama_cpp_tokenize(meta, text):
    tokens, types = meta["tokens"], meta["types"]
    ids = {t: i for i, t in enumerate(tokens)}
    out = [meta["bos"]] if meta["add_bos"] else []
    is_prev_special = True
    for kind, v in partition(text, tokens, types):
        if kind == "token":
            out.append(v)
            is_prev_special = True
            continue
        if meta["model"] == "llama":
            t = (" " if meta["add_space_prefix"] and is_prev_special else "") + v
            out += spm_session(t.replace(" ", SPACE), ids, meta["scores"])
        else:
            pieces = [v]
            for p in PRE_REGEX[meta["pre"]]:
                pieces = regex_split(pieces, p)
            ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(meta["merges"])}
            for p in pieces:
                out += bpe_session(byte_encode(p), ids, ranks, meta["pre"] == "llama-bpe")
        is_prev_special = False
    if meta["add_eos"]:
        out.append(meta["eos"])
    return out


# ---------------------------------------------------------------- 2. a tokenizer.json reader


def hf_tokenize(tj, text):
    vocab = tj["model"]["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
              for m in tj["model"]["merges"]]
    ranks = {m: r for r, m in enumerate(merges)}
    added = sorted(tj["added_tokens"], key=lambda t: -len(t["content"]))
    segs = [("text", text)] if text else []
    if added:
        pat = "|".join(regex.escape(t["content"]) for t in added)
        by_content = {t["content"]: t["id"] for t in added}
        segs = []
        last = 0
        for m in regex.finditer(pat, text):
            if m.start() > last:
                segs.append(("text", text[last:m.start()]))
            segs.append(("token", by_content[m.group()]))
            last = m.end()
        if last < len(text):
            segs.append(("text", text[last:]))
    ids = []
    for kind, v in segs:
        if kind == "token":
            ids.append(v)
            continue
        norm = tj["normalizer"]
        for n in (norm["normalizers"] if norm else []):
            if n["type"] == "Prepend":
                v = n["prepend"] + v if v else v
            elif n["type"] == "Replace":
                v = v.replace(n["pattern"]["String"], n["content"])
            else:
                raise ValueError(n["type"])
        words = [v]
        pre = tj["pre_tokenizer"]
        for p in (pre["pretokenizers"] if pre else []):
            if p["type"] == "Split":
                assert p["behavior"] == "Isolated" and not p["invert"]
                words = regex_split(words, p["pattern"]["Regex"])
            elif p["type"] == "ByteLevel":
                assert not p["use_regex"] and not p["add_prefix_space"]
                words = [byte_encode(w) for w in words]
            else:
                raise ValueError(p["type"])
        model = tj["model"]
        for w in words:
            if model["ignore_merges"] and w in vocab:
                ids.append(vocab[w])
                continue
            syms = []
            for c in w:
                if c in vocab:
                    syms.append(c)
                elif model["byte_fallback"]:
                    syms += ["<0x%02X>" % b for b in c.encode()]
                else:
                    syms.append(model["unk_token"])
            syms = merge_pairs(syms, lambda a, b: ranks.get((a, b)))
            ids += [vocab[s] for s in syms]
    post = tj["post_processor"]
    if post is None:
        return ids
    assert post["type"] == "TemplateProcessing"
    out = []
    for item in post["single"]:
        if "Sequence" in item:
            out += ids
        else:
            out += post["special_tokens"][item["SpecialToken"]["id"]]["ids"]
    return out


# ---------------------------------------------------------------- 3. tokenizers.js


def tokenizers_js():
    """The package's directory, or None (with the reason printed)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("note: node/npm not available: tokenizers.js not run")
        return None
    d = os.path.join(os.path.dirname(work), "tokenizers_js")
    pkg = os.path.join(d, "node_modules", "@huggingface", "tokenizers")
    if not os.path.isdir(pkg):
        os.makedirs(d, exist_ok=True)
        try:
            r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                                "@huggingface/tokenizers@0.2.0"], cwd=d, capture_output=True,
                               text=True, timeout=300)
        except subprocess.TimeoutExpired:
            print("note: npm install @huggingface/tokenizers timed out: tokenizers.js not run")
            return None
        if r.returncode != 0:
            print("note: npm install @huggingface/tokenizers failed: tokenizers.js not run\n" +
                  r.stderr[-500:])
            return None
    return pkg


JS = r"""
const fs = require("fs");
const { Tokenizer } = require(process.argv[2] + "/dist/tokenizers.cjs");
const dir = process.argv[3];
const tok = new Tokenizer(JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")),
                          JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8")));
const samples = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(samples.map((s) => tok.encode(s).ids)));
"""


def js_tokenize(pkg, folder, samples):
    script = os.path.join(work, "encode.js")
    with open(script, "w") as f:
        f.write(JS)
    r = subprocess.run(["node", script, pkg, folder], input=json.dumps(samples),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, r.stderr[-2000:]
    return json.loads(r.stdout), ""


# ---------------------------------------------------------------- the cases

js_pkg = tokenizers_js()
cases = []

tokens, scores, types = spm_vocab()
spm_kvs = [kv_str("tokenizer.ggml.model", "llama"), kv_strs("tokenizer.ggml.tokens", tokens),
           kv_f32s("tokenizer.ggml.scores", scores), kv_i32s("tokenizer.ggml.token_type", types),
           kv_u32("tokenizer.ggml.bos_token_id", 1), kv_u32("tokenizer.ggml.eos_token_id", 2),
           kv_u32("tokenizer.ggml.unknown_token_id", 0),
           kv_str("tokenizer.chat_template", "{{ messages }}")]
scores32 = [float(np.float32(s)) for s in scores]
cases.append(("spm", tokens, spm_kvs,
              dict(model="llama", tokens=tokens, types=types, scores=scores32, bos=1, eos=2,
                   add_bos=True, add_eos=False, add_space_prefix=True)))
# No space prefix, EOS added, no BOS.
cases.append(("spm_flags", tokens,
              spm_kvs + [kv_bool("tokenizer.ggml.add_space_prefix", False),
                         kv_bool("tokenizer.ggml.add_bos_token", False),
                         kv_bool("tokenizer.ggml.add_eos_token", True)],
              dict(model="llama", tokens=tokens, types=types, scores=scores32, bos=1, eos=2,
                   add_bos=False, add_eos=True, add_space_prefix=False)))
for pre, add_bos in [("llama-bpe", True), ("qwen2", False)]:
    btok, bmerges, btypes = bpe_vocab(pre)
    bos, eos = btok.index("<|begin_of_text|>"), btok.index("<|end_of_text|>")
    cases.append(("bpe_" + pre, btok,
                  [kv_str("tokenizer.ggml.model", "gpt2"), kv_str("tokenizer.ggml.pre", pre),
                   kv_strs("tokenizer.ggml.tokens", btok), kv_i32s("tokenizer.ggml.token_type", btypes),
                   kv_strs("tokenizer.ggml.merges", bmerges),
                   kv_u32("tokenizer.ggml.bos_token_id", bos),
                   kv_u32("tokenizer.ggml.eos_token_id", eos)],
                  dict(model="gpt2", pre=pre, tokens=btok, types=btypes, merges=bmerges, bos=bos,
                       eos=eos, add_bos=add_bos, add_eos=False)))

for name, toks, kvs, meta in cases:
    gguf = os.path.join(work, name + ".gguf")
    llama_model(gguf, len(toks), kvs)
    r, out = convert(name, gguf)
    check(name + ": --hf exits 0", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        continue
    check(name + ": no 'no tokenizer' note", "no tokenizer" not in r.stderr, r.stderr)
    with open(os.path.join(out, "tokenizer.json")) as f:
        tj = json.load(f)
    with open(os.path.join(out, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    check(name + ": vocab ids", tj["model"]["vocab"] == {t: i for i, t in enumerate(toks)})
    check(name + ": add_bos_token", cfg["add_bos_token"] == meta["add_bos"], str(cfg))
    check(name + ": add_eos_token", cfg["add_eos_token"] == meta["add_eos"], str(cfg))
    check(name + ": bos / eos tokens", cfg["bos_token"] == toks[meta["bos"]] and
          cfg["eos_token"] == toks[meta["eos"]], str(cfg))
    check(name + ": model_max_length", cfg.get("model_max_length") == 96, str(cfg))
    specials = {t["content"]: t["special"] for t in tj["added_tokens"]}
    check(name + ": control tokens special, user-defined not",
          specials.get("<|im_end|>") is True and specials.get("<|user|>") is False, str(specials))
    if meta["model"] == "llama":
        check(name + ": chat_template", cfg.get("chat_template") == "{{ messages }}")
        check(name + ": tokenizer_class", cfg["tokenizer_class"] == "LlamaTokenizerFast")
    want = [llama_cpp_tokenize(meta, s) for s in SAMPLES]
    got = [hf_tokenize(tj, s) for s in SAMPLES]
    for s, w, g in zip(SAMPLES, want, got):
        check("%s: tokenizer.json ids of %r" % (name, s), w == g, "llama.cpp %s, json %s" % (w, g))
    # The samples must exercise merges, byte fallback and specials.
    flat = [i for w in want for i in w]
    check(name + ": samples use merged tokens", any(len(toks[i]) > 3 for i in flat))
    if meta["model"] == "llama":
        check(name + ": samples use byte fallback", any(toks[i].startswith("<0x") for i in flat))
    if js_pkg:
        js, err = js_tokenize(js_pkg, out, SAMPLES)
        check(name + ": tokenizers.js runs", js is not None, err)
        for s, w, g in zip(SAMPLES, want, js or []):
            check("%s: tokenizers.js ids of %r" % (name, s), w == g,
                  "llama.cpp %s, tokenizers.js %s" % (w, g))

# Metadata nibble does not reproduce: the weights are written, the tokenizer
# is not, and the note says why.
bad = [
    ("unknown_model", [kv_str("tokenizer.ggml.model", "t5"), kv_strs("tokenizer.ggml.tokens", ["a", "b"])],
     "tokenizer.ggml.model 't5'"),
    ("unknown_pre", [kv_str("tokenizer.ggml.model", "gpt2"), kv_str("tokenizer.ggml.pre", "nope"),
                     kv_strs("tokenizer.ggml.tokens", ["a", "b"])], "pre-tokenizer"),
    ("duplicate", [kv_str("tokenizer.ggml.model", "llama"),
                   kv_strs("tokenizer.ggml.tokens", ["a", "b", "a"])], "appears twice"),
    ("short_scores", [kv_str("tokenizer.ggml.model", "llama"),
                      kv_strs("tokenizer.ggml.tokens", ["a", "b", "c"]),
                      kv_f32s("tokenizer.ggml.scores", [0.0])], "1 entries for 3 tokens"),
    ("bad_merge", [kv_str("tokenizer.ggml.model", "gpt2"), kv_str("tokenizer.ggml.pre", "gpt-2"),
                   kv_strs("tokenizer.ggml.tokens", ["a", "b", "c"]),
                   kv_strs("tokenizer.ggml.merges", ["a b"])], "not all in the vocabulary"),
    ("scores_type", [kv_str("tokenizer.ggml.model", "llama"),
                     kv_strs("tokenizer.ggml.tokens", ["a", "b", "c"]),
                     kv_strs("tokenizer.ggml.scores", ["x", "y", "z"])], "not an array of numbers"),
    ("no_tokenizer", [], "no tokenizer.ggml.model"),
]
for name, kvs, why in bad:
    gguf = os.path.join(work, name + ".gguf")
    llama_model(gguf, 3, kvs)
    r, out = convert(name, gguf)
    check(name + ": weights written (exit 0)", r.returncode == 0, r.stderr)
    check(name + ": no tokenizer.json", not os.path.exists(os.path.join(out, "tokenizer.json")))
    check(name + ": the note says why", "no tokenizer written" in r.stderr and why in r.stderr,
          r.stderr)

print("hf tokenizer: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
