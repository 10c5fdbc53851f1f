"""preprocess_data.py: the files it writes follow Megatron's indexed dataset
format field by field (read back here with struct, not with the writer's
numpy), hold the byte-level tokens of each document plus the end-of-document
id, and bad input is refused with exit 2."""
import os
import struct
import tempfile
import unittest

from helpers import REPO, run_script


def read_indexed_dataset(prefix):
    """(dtype code, lengths, pointers, document indices, .bin bytes), read as Megatron's _IndexReader does."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", idx[:9]
    version, = struct.unpack_from("<Q", idx, 9)
    code, = struct.unpack_from("<B", idx, 17)
    sequences, documents = struct.unpack_from("<QQ", idx, 18)
    at = 34
    lengths = list(struct.unpack_from(f"<{sequences}i", idx, at))
    pointers = list(struct.unpack_from(f"<{sequences}q", idx, at + 4 * sequences))
    document_indices = list(struct.unpack_from(f"<{documents}q", idx, at + 12 * sequences))
    assert len(idx) == at + 12 * sequences + 8 * documents, "no bytes beyond the three arrays"
    assert version == 1
    with open(prefix + ".bin", "rb") as f:
        return code, lengths, pointers, document_indices, f.read()


class WritesMegatronsFormat(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.text = os.path.join(self.tmp.name, "text.txt")
        with open(self.text, "w", encoding="utf-8") as f:
            f.write("First paragraph,\nstill first.\n\n  \nSecond: é\n\n\nThird\n")
        self.prefix = os.path.join(self.tmp.name, "data")

    def test_paragraphs_become_documents_of_bytes_and_an_end_token(self):
        rc, out, err = run_script("preprocess_data.py", "--input", self.text, "--output-prefix", self.prefix)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("3 documents", out)
        self.assertIn("vocab 257", out)
        code, lengths, pointers, documents, data = read_indexed_dataset(self.prefix)
        self.assertEqual(code, 8)  # uint16
        want = ["First paragraph,\nstill first.", "Second: é", "Third"]
        self.assertEqual(lengths, [len(w.encode()) + 1 for w in want])
        self.assertEqual(pointers, [0, 2 * lengths[0], 2 * (lengths[0] + lengths[1])])
        self.assertEqual(documents, [0, 1, 2, 3])
        tokens = list(struct.unpack(f"<{len(data) // 2}H", data))
        self.assertEqual(len(data), 2 * sum(lengths))
        for w, p, n in zip(want, pointers, lengths):
            sequence = tokens[p // 2:p // 2 + n]
            self.assertEqual(sequence[-1], 256)
            self.assertEqual(bytes(sequence[:-1]).decode(), w)

    def test_lines_become_documents(self):
        rc, out, err = run_script("preprocess_data.py", "--input", self.text, "--output-prefix", self.prefix,
                                  "--documents", "lines")
        self.assertEqual(rc, 0, out + err)
        _, lengths, _, documents, _ = read_indexed_dataset(self.prefix)
        self.assertEqual(len(lengths), 4)
        self.assertEqual(documents, [0, 1, 2, 3, 4])

    def test_the_readme_makes_a_dataset(self):
        rc, out, err = run_script("preprocess_data.py", "--input", os.path.join(REPO, "README.md"),
                                  "--output-prefix", self.prefix)
        self.assertEqual(rc, 0, out + err)
        _, lengths, _, _, data = read_indexed_dataset(self.prefix)
        self.assertGreater(sum(lengths), 1000)
        self.assertEqual(len(data), 2 * sum(lengths))

    def test_bad_input_is_refused(self):
        empty = os.path.join(self.tmp.name, "empty.txt")
        open(empty, "w").close()
        for args in (["--input", os.path.join(self.tmp.name, "none.txt"), "--output-prefix", self.prefix],
                     ["--input", empty, "--output-prefix", self.prefix],
                     ["--input", self.text, "--output-prefix", os.path.join(self.tmp.name, "no", "where")]):
            rc, out, err = run_script("preprocess_data.py", *args)
            self.assertEqual(rc, 2, out + err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertFalse(os.path.exists(self.prefix + ".idx"))


if __name__ == "__main__":
    unittest.main()
