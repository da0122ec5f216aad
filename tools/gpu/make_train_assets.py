"""Makes the tokenizer and the text data of a TorchTitan throughput run on a
host that can fetch nothing (no Hugging Face, no C4).

    make_train_assets.py OUTDIR [--megabytes N] [--vocab N]

OUTDIR/tokenizer/   tokenizer.json and tokenizer_config.json, a byte-level
                    BPE trained here (TorchTitan's ``model.hf_assets_path``)
OUTDIR/data/        data.json, one {"text": ...} object per line, the layout
                    of TorchTitan's ``c4_test`` dataset (``training.dataset_path``)

The text is what the host has: Python's own standard library sources and
this collection's documentation. Throughput does not depend on what the
tokens say: the model's shapes (Llama 3 8B keeps its 128,256-entry
embedding whatever the tokenizer's size) and the sequence length fix the
work of a step; the loss only has to fall, to show the run is training.
"""

import argparse
import json
import os
import sys
import sysconfig

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"


def corpus(root, limit_bytes):
    """Texts of at most limit_bytes in all, in a fixed order."""
    sources = [os.path.join(root, "docs"), sysconfig.get_paths()["stdlib"]]
    total = 0
    for source in sources:
        for directory, subdirs, files in os.walk(source):
            subdirs.sort()
            for name in sorted(files):
                if not name.endswith((".py", ".md")):
                    continue
                try:
                    with open(os.path.join(directory, name), encoding="utf-8") as handle:
                        text = handle.read()
                except (OSError, UnicodeDecodeError):
                    continue
                if len(text) < 200:
                    continue
                yield text
                total += len(text.encode("utf-8"))
                if total >= limit_bytes:
                    return


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("outdir")
    parser.add_argument("--megabytes", type=int, default=40, help="text to gather (default %(default)s)")
    parser.add_argument("--vocab", type=int, default=16384, help="tokenizer's vocabulary (default %(default)s)")
    args = parser.parse_args(argv)
    # Imported here so that --help works without them.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    texts = list(corpus(root, args.megabytes * 1024 * 1024))
    if not texts:
        sys.exit("no text found under %s/docs or the standard library" % root)
    data_dir = os.path.join(args.outdir, "data")
    tokenizer_dir = os.path.join(args.outdir, "tokenizer")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(tokenizer_dir, exist_ok=True)
    with open(os.path.join(data_dir, "data.json"), "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}) + "\n")

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.save(os.path.join(tokenizer_dir, "tokenizer.json"))
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": True,
                   "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"}, handle, indent=2)
    print(json.dumps({"texts": len(texts), "bytes": sum(len(t.encode("utf-8")) for t in texts),
                      "vocab": tokenizer.get_vocab_size(), "data": data_dir, "tokenizer": tokenizer_dir}))


if __name__ == "__main__":
    main()
