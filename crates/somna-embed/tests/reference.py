# Reference embeddings independent of candle, for all-MiniLM-L6-v2 (BERT) and all-mpnet-base-v2
# (MPNet, after transformers' modeling_mpnet.py: RoBERTa-style positions from the pad id, one
# relative-position bias shared by every layer), picked by config.json's model_type: the network
# written out in numpy (float64), tokenized by Hugging Face's Python tokenizers, mean-pooled and
# L2-normalized as sentence-transformers does. Writes text<TAB>comma-separated floats;
# tests/reference.tsv (MiniLM) and tests/reference_mpnet.tsv are its output, which tests/model.rs
# compares with LocalEmbedder's. Regenerate with:
#   python3 -m venv /tmp/embref && /tmp/embref/bin/pip install numpy tokenizers
#   /tmp/embref/bin/python crates/somna-embed/tests/reference.py "$(scripts/local-embedder.sh | tail -n1)" \
#       > crates/somna-embed/tests/reference.tsv
#   /tmp/embref/bin/python crates/somna-embed/tests/reference.py \
#       "$(scripts/local-embedder.sh --model all-mpnet-base-v2 | tail -n1)" \
#       > crates/somna-embed/tests/reference_mpnet.tsv
import json, math, struct, sys
import numpy as np
from tokenizers import Tokenizer

d = sys.argv[1]
import os
cfg = json.load(open(f"{d}/config.json")) if os.path.exists(f"{d}/config.json") else {"model_type": "bert"}
MPNET = cfg.get("model_type") == "mpnet"
if MPNET:
    H, LAYERS, HEADS = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    PAD, EPS, NB = cfg["pad_token_id"], cfg["layer_norm_eps"], cfg.get("relative_attention_num_buckets", 32)
else:
    EPS, NB = 1e-12, 32
raw = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); base = 8 + n
W = {}
for k, v in hdr.items():
    if k == "__metadata__": continue
    a, b = v["data_offsets"]
    dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
    W[k] = np.frombuffer(raw[base + a:base + b], dtype=dt).reshape(v["shape"]).astype(np.float64 if dt == np.float32 else dt)
tok = Tokenizer.from_file(f"{d}/tokenizer.json")
tok.no_padding(); tok.enable_truncation(256)
erf = np.vectorize(math.erf)
def ln(x, p): 
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + EPS) * W[p + ".weight"] + W[p + ".bias"]
def lin(x, p): return x @ W[p + ".weight"].T + W[p + ".bias"]
def embed_bert(text):
    ids = tok.encode(text).ids; L = len(ids)
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][:L] + W["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "embeddings.LayerNorm")
    for i in range(6):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, p + f"attention.self.{n}").reshape(L, 12, 32).transpose(1, 0, 2) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(32)
        s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        c = (s @ v).transpose(1, 0, 2).reshape(L, 384)
        x = ln(x + lin(c, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense"); h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = ln(x + lin(h, p + "output.dense"), p + "output.LayerNorm")
    m = x.mean(0)
    return m / max(np.linalg.norm(m), 1e-12)
def bucket(rel, num_buckets=NB, max_distance=128):
    # transformers' MPNetEncoder.relative_position_bucket, element by element
    ret = 0; n = -rel; num_buckets //= 2
    if n < 0: ret += num_buckets
    n = abs(n); max_exact = num_buckets // 2
    if n < max_exact: return ret + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(large, num_buckets - 1)
def embed_mpnet(text):
    ids = tok.encode(text).ids; L = len(ids); D = H // HEADS
    pos = np.arange(1, L + 1) + PAD
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][pos]
    x = ln(x, "embeddings.LayerNorm")
    rb = np.array([[bucket(k - q) for k in range(L)] for q in range(L)])
    bias = W["encoder.relative_attention_bias.weight"][rb].transpose(2, 0, 1)  # heads, q, k
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, p + f"attention.attn.{n}").reshape(L, HEADS, D).transpose(1, 0, 2) for n in "qkv")
        s = q @ k.transpose(0, 2, 1) / math.sqrt(D) + bias
        s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        c = (s @ v).transpose(1, 0, 2).reshape(L, H)
        x = ln(x + lin(c, p + "attention.attn.o"), p + "attention.LayerNorm")
        h = lin(x, p + "intermediate.dense"); h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = ln(x + lin(h, p + "output.dense"), p + "output.LayerNorm")
    m = x.mean(0)
    return m / max(np.linalg.norm(m), 1e-12)
embed = embed_mpnet if MPNET else embed_bert
texts = [
    "The cat sat on the mat", "A kitten was sitting on a rug", "Quarterly revenue rose by 4%",
    "", "ünïcödé and emoji 🐈", "Hey, can you check the logs before deploying tomorrow morning? I think memory usage went up after the last release.",
    "word " * 400,
]
for t in texts:
    print(t + "\t" + ",".join(f"{x:.8f}" for x in embed(t)))
