#!/usr/bin/env python3
"""Writes a text file as a Megatron-LM indexed dataset, PREFIX.bin and
PREFIX.idx (the format of megatron/core/datasets/indexed_dataset.py), for
`sextant run step/train --set data=PREFIX`.

    preprocess_data.py --input FILE --output-prefix PREFIX [--documents paragraphs|lines]

Tokenizer: byte-level, nothing to download. Token ids 0-255 are the bytes
of the UTF-8 text; 256 ends every document (Megatron's --append-eod). The
vocabulary has 257 ids, so the step model's --vocab must be at least 257
(sextant refuses a smaller one, naming the largest id in the data).

Documents are paragraphs (text between blank lines; the default) or
lines; blank ones are skipped. Each document is one sequence (Megatron's
preprocess_data.py without --split-sentences). Token ids are stored as
uint16 (dtype code 8).

Exit status: 0 written, 2 bad input (one line on stderr, nothing written).
"""
import argparse
import os
import re
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
UINT16 = 8  # Megatron's DType code for numpy.uint16
END_OF_DOCUMENT = 256
VOCAB_SIZE = 257


def documents_of(text, unit):
    """The non-blank paragraphs or lines of text, stripped of surrounding whitespace."""
    parts = re.split(r"\n\s*\n", text) if unit == "paragraphs" else text.splitlines()
    return [p.strip() for p in parts if p.strip()]


def tokenize(document):
    """Byte-level ids of one document, ending with the end-of-document id."""
    ids = np.frombuffer(document.encode("utf-8"), dtype=np.uint8).astype(np.uint16)
    return np.append(ids, np.uint16(END_OF_DOCUMENT))


def write_indexed_dataset(prefix, sequences):
    """PREFIX.bin: the sequences back to back; PREFIX.idx: Megatron's index,
    one document per sequence."""
    lengths = np.array([len(s) for s in sequences], dtype=np.int32)
    itemsize = np.dtype(np.uint16).itemsize
    pointers = np.zeros(len(sequences), dtype=np.int64)
    pointers[1:] = np.cumsum(lengths[:-1], dtype=np.int64) * itemsize
    document_indices = np.arange(len(sequences) + 1, dtype=np.int64)
    with open(prefix + ".bin", "wb") as f:
        for s in sequences:
            f.write(s.astype("<u2").tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(np.array([VERSION], dtype="<u8").tobytes())
        f.write(np.array([UINT16], dtype="<u1").tobytes())
        f.write(np.array([len(sequences), len(document_indices)], dtype="<u8").tobytes())
        f.write(lengths.astype("<i4").tobytes())
        f.write(pointers.astype("<i8").tobytes())
        f.write(document_indices.astype("<i8").tobytes())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="a UTF-8 text file")
    parser.add_argument("--output-prefix", required=True, help="writes PREFIX.bin and PREFIX.idx")
    parser.add_argument("--documents", choices=["paragraphs", "lines"], default="paragraphs",
                        help="what one document is (default: paragraphs)")
    args = parser.parse_args(argv)
    try:
        with open(args.input, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"preprocess_data.py: --input {args.input}: {e}", file=sys.stderr)
        return 2
    documents = documents_of(text, args.documents)
    if not documents:
        print(f"preprocess_data.py: --input {args.input} holds no non-blank {args.documents}", file=sys.stderr)
        return 2
    folder = os.path.dirname(os.path.abspath(args.output_prefix))
    if not os.path.isdir(folder):
        print(f"preprocess_data.py: --output-prefix {args.output_prefix}: no folder {folder}", file=sys.stderr)
        return 2
    sequences = [tokenize(d) for d in documents]
    write_indexed_dataset(args.output_prefix, sequences)
    tokens = sum(len(s) for s in sequences)
    print(f"wrote {args.output_prefix}.bin and {args.output_prefix}.idx: {len(sequences)} documents, "
          f"{tokens} tokens, vocab {VOCAB_SIZE} (bytes 0-255, end of document {END_OF_DOCUMENT}): "
          f"use --vocab {VOCAB_SIZE} or more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
