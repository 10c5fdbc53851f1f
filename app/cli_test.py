#!/usr/bin/env python3
"""Bad input to `sextant run`: one line on stderr naming the parameter and the
rule, exit code 2, and no results file. Run by ctest with the binary and the
mpiexec to use:  cli_test.py SEXTANT MPIEXEC."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

SEXTANT = MPIEXEC = None

# (ranks, arguments, text the error line must contain). Suites add their rows.
BAD_INPUT = [
    (4, ["--tp", "2", "--dp", "1"], "world size 4 must equal tp*cp*pp*dp = 2*1*1*1 = 2"),
    (4, ["--tp", "3"], "tp*cp*pp = 3*1*1 = 3 must divide the world size 4"),
    (4, ["--ep", "3"], "--ep 3 = 3 must divide tp*cp*dp = 4"),
    (4, ["--tp", "2", "--etp", "4", "--ep", "2"], "must divide tp*cp*dp = 4"),
    (2, ["nosuch"], "unknown suite 'nosuch'"),
    (2, ["collectives/nosuch"], "unknown case 'collectives/nosuch'"),
    (2, ["collectives", "--min-bytes", "6"], "message size 6 B must be a multiple of the element size 4"),
    (4, ["collectives/all_gather", "--min-bytes", "8", "--max-bytes", "8"],
     "must be a multiple of the element size 4 times the group size 4 = 16"),
    (2, ["--config", "/nonexistent.toml"], "--config '/nonexistent.toml' is not a readable file"),
    (1, ["--iters", "1000000000000"], "--iters 1000000000000 must be at most 1000000"),
    (1, ["--warmup", "4294967296"], "--warmup 4294967296 must be at most 1000000"),
    (1, ["--timeout", "nan"], "--timeout 'nan' must be a positive number of seconds"),
    (1, ["--timeout", "0"], "--timeout '0' must be a positive number of seconds"),
    (1, ["--timeout", "-3"], "--timeout '-3' must be a positive number of seconds"),
    (2, ["--resume", "/nonexistent.json"], "--resume '/nonexistent.json' is not a readable file"),
    (2, ["--dtype", "fp8"], "--dtype 'fp8' must be one of f64, f32, bf16, f16"),
    (2, ["--ranks", "8"], "--ranks 8 exceeds the world size 2"),
    (2, ["--ranks", "1,x"], "--ranks '1,x' must be a comma-separated list of integers"),
    (2, ["--profile", "huge"], "--profile 'huge' must be default, ci or qualify"),
    (2, ["--group", "xp", "--tp", "2"], "--group 'xp' must be one of"),
    (2, ["collectives", "--group", "tp"], "--group tp needs a pinned parallel config"),
    (2, ["--fault", "nope"], "--fault 'nope' is not planted by any selected case"),
    (2, ["attention/p2p", "--fault", "ring_skip_step", "--fault-magnitude", "1e-3"],
     "--fault-magnitude 0.001 needs a --fault that has a size (such as dkv_scale), not 'ring_skip_step'"),
    (2, ["attention/p2p", "--fault-magnitude", "1e-3"], "--fault-magnitude 0.001 needs a --fault that has a size"),
    (2, ["attention/p2p", "--fault", "dkv_scale", "--fault-magnitude", "-1"], "--fault-magnitude -1 must be a finite number above 0"),
    (1, ["--seed", "-1"], "--seed '-1' must be a whole number from 0 to 18446744073709551615"),
    (1, ["--seed", "18446744073709551616"], "--seed '18446744073709551616' must be a whole number"),
    (2, ["--bogus"], "--bogus"),
    (1, ["--comm", "nccl"], "--comm nccl needs --device cuda"),
    (1, ["--comm", "mpi", "--device", "cuda"], "--comm: mpi not in {auto,nccl,staged}"),
    (2, ["tp_sp/attn_proj", "--tp", "2", "--heads", "3"], "--tp 2 must divide --heads 3"),
    (2, ["tp_sp/mlp", "--tp", "2", "--hidden", "33"], "--tp 2 must divide --hidden 33"),
    (4, ["moe", "--ep", "4", "--experts", "6"], "--ep 4 must divide --experts 6"),
    (4, ["moe", "--ep", "2", "--etp", "2", "--ffn", "5"], "--etp 2 must divide --ffn 5"),
    (2, ["moe", "--topk", "9", "--experts", "8"], "--topk 9 must be at most --experts 8"),
    (4, ["moe", "--ep", "4", "--etp", "2"], "--etp 2 x --ep 4 = 8 must divide tp*cp*dp = 4"),
    (2, ["moe", "--set", "capacity_factor=0"], "--set capacity_factor '0' must be a finite number in [1e-06, 1000000]"),
    (2, ["tp_sp/mlp", "--tp", "2", "--ffn", "99"], "--tp 2 must divide --ffn 99"),
    (2, ["tp_sp/vocab", "--tp", "2", "--vocab", "101"], "--tp 2 must divide --vocab 101"),
    (2, ["tp_sp", "--tp", "2", "--sp", "--seq", "7"], "--tp 2 must divide --seq 7 under --sp"),
    (4, ["tp_sp", "--tp", "2", "--batch", "3"], "--dp 2 must divide --batch 3"),
    (4, ["tp_sp", "--tp", "2", "--cp", "2"], "tp_sp runs tp x dp: --cp 2 must be 1"),
    (4, ["pipeline/1f1b", "--pp", "4", "--layers", "6"], "--layers 6 must be divisible by pp*v = 4*1 = 4"),
    (4, ["pipeline/zb-h1", "--pp", "4", "--microbatches", "2"],
     "--microbatches 2 must be at least --pp 4 for schedule zb-h1"),
    (2, ["pipeline/zb-v", "--pp", "2", "--vpp", "3"], "--vpp 3 must be 2 for schedule zb-v"),
    (2, ["pipeline", "--set", "schedule=pipedream"], "--set schedule 'pipedream' must be one of gpipe, 1f1b"),
    (2, ["pipeline", "--pp", "2", "--set", "schedule=csv", "--set", "schedule_file="
         + os.path.join(os.path.dirname(os.path.abspath(__file__)), "../suites/pipeline/testdata/unknown_action.csv")],
     "CSV rank 1 step 2: unknown action '1X1'"),
    (2, ["pipeline", "--pp", "2", "--set", "schedule=csv", "--set", "schedule_file="
         + os.path.join(os.path.dirname(os.path.abspath(__file__)), "../suites/pipeline/testdata/deadlock.csv")],
     "deadlock: with blocking receives rank 0 step 1 (0B0) waits for 1B0"),
    (4, ["attention", "--seq", "64", "--set", "seq_lens=40,8"], "--set seq_lens=40,8: the lengths sum to 48, not --seq 64"),
    (2, ["attention/p2p", "--seq", "64", "--set", "seq_lens=0,0"],
     "--set seq_lens=0,0: at least one sequence must have a token"),
    (1, ["attention/p2p", "--set", "attention_impl=cudnn"], "--set attention_impl=cudnn needs --device cuda"),
    (1, ["step/train", "--set", "attention_impl=cudnn"], "--set attention_impl=cudnn needs --device cuda"),
    (1, ["ops/attention", "--set", "attention_impl=cudnn"], "--set attention_impl=cudnn needs --device cuda"),
    (1, ["attention/dynamic_cp", "--set", "attention_impl=cudnn"], "--set attention_impl=cudnn needs --device cuda"),
    (1, ["attention/a2a", "--set", "attention_impl=flash"], "--set attention_impl 'flash' must be one of own, cudnn"),
    (2, ["attention/p2p", "--seq", "64", "--set", "seq_lens=70,-6"],
     "--set seq_lens=70,-6: length -6 must not be negative"),
    (2, ["attention/p2p", "--seq", "64", "--set", "seq_lens=zipf:0"], "--set seq_lens=zipf:0: zipf:N needs a positive count N"),
    (4, ["attention/p2p", "--cp", "4", "--seq", "64", "--set", "seq_lens=20,28,16", "--set", "thd_padding=false",
         "--set", "layout=zigzag"],
     "--set thd_padding=false: sequence length 20 must be divisible by 2*cp = 8 (each sequence is zigzagged on its own)"),
    (2, ["attention/a2a", "--seq", "64", "--set", "seq_lens=40,24", "--set", "causal=false"],
     "--set seq_lens: packed sequences attend causally; --set causal=false does not apply"),
    (2, ["attention/dynamic_cp", "--seq", "64", "--set", "seq_lens=32,31"], "--set seq_lens=32,31: the lengths sum to 63, not --seq 64"),
    (4, ["attention/dynamic_cp", "--tp", "2", "--cp", "2"], "attention/dynamic_cp runs dp x cp ranks: --tp 2 and --pp 1 must be 1"),
    (4, ["step/train", "--seq", "32", "--set", "seq_lens=20,10"], "--set seq_lens=20,10: the lengths sum to 30, not --seq 32"),
    (4, ["step/train", "--cp", "2", "--dp", "2", "--seq", "32", "--set", "seq_lens=18,14"],
     "--set seq_lens: a sequence of 18 rows (padding included) must be divisible by 2 x --cp 2 = 4 (step/train zigzags each sequence; --set pad_to pads them)"),
    (4, ["step/train", "--cp", "2", "--dp", "2", "--seq", "32", "--set", "seq_lens=18,5", "--set", "pad_to=4"],
     "--set seq_lens=18,5: the lengths padded to multiples of 4 and 0 rows of tail padding fill 28 rows, not --seq 32"),
    (2, ["step/train", "--seq", "32", "--set", "seq_lens=18,5", "--set", "pad_to=4", "--set", "tail_padding=2"],
     "--set tail_padding=2 must be a multiple of --set pad_to=4"),
    (4, ["step", "--tp", "2", "--sp", "--ep", "4"], "--etp 2 x --ep 4 = 8 must divide tp*cp*dp = 4"),
    (2, ["step/train", "--pp", "2", "--layers", "3"], "--pp 2 x --vpp 1 = 2 must divide --layers 3"),
    (2, ["step/train", "--set", "moe_pattern=0101", "--layers", "6"],
     "--set moe_pattern=0101 has 4 entries but --layers is 6"),
    (2, ["step/train", "--tp", "2", "--heads", "3"], "--tp 2 must divide --heads 3"),
    (4, ["step/train", "--cp", "4", "--seq", "36"], "2 x --cp 4 = 8 must divide --seq 36"),
    (4, ["step/train", "--ep", "4", "--experts", "6"], "--ep 4 must divide --experts 6"),
    (2, ["step/train", "--tp", "2"], "MoE layers with --tp 2 need --sp"),
    (4, ["step/train", "--cp", "4", "--heads", "2", "--set", "cp_comm=a2a"],
     "--cp 4 must divide heads/tp = 2/1 = 2 for cp_comm a2a (Ulysses scatters heads)"),
    (2, ["step/train", "--set", "cp_comm=ring"], "--set cp_comm 'ring' must be one of p2p, a2a, allgather, a2a+p2p"),
    (2, ["step/train", "--dtype", "f16"], "--dtype f16: step/train runs f32 or bf16"),
    (2, ["step/train", "--dtype", "bf16"], "--dtype bf16 needs a dense model (--set moe_every=0), not 2 MoE layers"),
    (2, ["step/sweep", "--dtype", "bf16"], "--dtype bf16 needs a dense model (--set moe_every=0)"),
    (2, ["step/train", "--set", "data=/nonexistent/text"],
     "--set data=/nonexistent/text: cannot open /nonexistent/text.idx"),
    (2, ["step/train", "--set", "overlap_param_gather=true"], "--set overlap_param_gather=true needs --set zero=true"),
    (2, ["step/train", "--set", "bucket_mb=-1"], "--set bucket_mb '-1' must be a finite number in [0, 1000000]"),
    # Options are declared per case and parsed once: wrong types, non-finite
    # and non-integral numbers, out-of-range values and unknown keys.
    (2, ["attention", "--set", "causal=maybe"], "--set causal 'maybe' must be true or false"),
    (2, ["attention", "--set", "seq=abc"], "--set seq 'abc' must be an integer in [1, 2147483648]"),
    (2, ["attention", "--set", "seq=64.5"], "--set seq '64.5' must be an integer"),
    (2, ["attention", "--seq", "abc"], "--seq 'abc' must be an integer"),
    (2, ["attention", "--seq", ""], "--seq '' must be an integer"),
    (2, ["attention", "--seq", "0"], "--seq '0' must be an integer in [1, 2147483648]"),
    (2, ["attention", "--heads", "0"], "--heads '0' must be an integer in [1, 2147483648]"),
    (2, ["attention", "--kv-heads", "-2"], "--kv-heads '-2' must be an integer"),
    (2, ["attention", "--head-dim", "1.5"], "--head-dim '1.5' must be an integer"),
    (2, ["attention", "--set", "layout=diagonal"], "--set layout 'diagonal' must be one of contiguous, zigzag"),
    (2, ["attention", "--set", "reference=half"], "--set reference 'half' must be one of full, spot"),
    (2, ["attention", "--set", "a2a_size=0"], "--set a2a_size '0' must be an integer in [1, 65536]"),
    (2, ["attention", "--set", "seqq=64"], "did you mean 'seq'?"),
    (2, ["attention", "--set", "no_such_key=1"], "no selected case has an option 'no_such_key'"),
    (2, ["collectives", "--set", "min_bytes=abc"], "--set min_bytes 'abc' must be a byte count"),
    (2, ["collectives", "--min-bytes", "inf"], "--min-bytes 'inf' must be a byte count"),
    (2, ["collectives", "--min-bytes", "-1K"], "--min-bytes '-1K' must be a byte count"),
    (2, ["collectives", "--step-factor", "1"], "--step-factor '1' must be an integer in [2, 1024]"),
    (2, ["collectives", "--set", "group=xp"], "--set group 'xp' must be one of world, tp"),
    (2, ["collectives", "--seq", "64"], "no selected case has an option 'seq'"),
    (2, ["tp_sp", "--hidden", "-8"], "--hidden '-8' must be an integer in [1, 2147483648]"),
    (2, ["tp_sp", "--set", "regather=maybe"], "--set regather 'maybe' must be true or false"),
    (2, ["tp_sp", "--vocab", "1e40"], "--vocab '1e40' must be an integer"),
    (2, ["moe", "--set", "topk=0"], "--set topk '0' must be an integer in [1, 65536]"),
    (2, ["moe", "--set", "routing=zipf"], "--set routing 'zipf' must be one of uniform, skewed"),
    (2, ["moe", "--set", "skew=nan"], "--set skew 'nan' must be a finite number"),
    (2, ["moe", "--set", "aux_coeff=-1"], "--set aux_coeff '-1' must be a finite number in [0, 1000000]"),
    (2, ["moe", "--set", "sweep=everything"], "--set sweep 'everything' must be one of recipes, full"),
    (2, ["moe", "--set", "tokens=0"], "--set tokens '0' must be an integer"),
    (2, ["pipeline", "--microbatches", "0"], "--microbatches '0' must be an integer in [1, 1048576]"),
    (2, ["pipeline", "--layers", "two"], "--layers 'two' must be an integer"),
    (2, ["pipeline/zb-v", "--pp", "2", "--vpp", "1"], "--vpp 1 must be 2 for schedule zb-v"),
    (2, ["step/train", "--set", "lr=nan"], "--set lr 'nan' must be a finite number"),
    (2, ["step/train", "--set", "lr=inf"], "--set lr 'inf' must be a finite number"),
    (2, ["step/train", "--set", "steps=abc"], "--set steps 'abc' must be an integer in [1, 1000]"),
    (2, ["step/train", "--set", "steps=0"], "--set steps '0' must be an integer in [1, 1000]"),
    (2, ["step/train", "--set", "zero=yes please"], "--set zero 'yes please' must be true or false"),
    (2, ["step/train", "--set", "moe_every=-1"], "--set moe_every '-1' must be an integer"),
    (2, ["step/train", "--set", "schedule=pipedream"], "--set schedule 'pipedream' must be one of gpipe, 1f1b"),
    (2, ["step/sweep", "--set", "config=all"], "did you mean 'configs'?"),
    (2, ["ops", "--set", "n=3"], "no selected case has an option 'n'"),
    (2, ["step/train", "--peak-tflops", "-5"], "--peak-tflops '-5' must be a finite number"),
    (2, ["step/train", "--peak-tflops", "nan"], "--peak-tflops 'nan' must be a finite number"),
    (2, ["step/train", "--peak-tflops", "inf"], "--peak-tflops 'inf' must be a finite number"),
    # Run flags.
    (2, ["--iters", "-5"], "--iters -5 must be at least 0"),
    (2, ["--warmup", "-3"], "--warmup -3 must be at least 0"),
    (2, ["--tp", "0"], "--tp 0 must be between 1 and 1048576"),
    (2, ["--cp", "-1"], "--cp -1 must be between 1 and 1048576"),
    (2, ["--tp", "65536", "--cp", "65537"], "tp*cp*pp = 65536*65537*1 = 4295032832 must divide the world size 2"),
    (2, ["--dtype", ""], "--dtype '' must name data types"),
    (2, ["--ranks", ""], "--ranks '' must be a comma-separated list of integers"),
    (2, ["--ranks", "0"], "--ranks 0 must be at least 1"),
    (2, ["--blas-threads", "-1"], "--blas-threads -1 must be at least 1"),
    (2, ["--blas-threads", "0"], "--blas-threads 0 must be at least 1"),
    (2, ["--device", "tpu"], "--device"),
    (2, ["-o", ""], "--out '' must name a folder"),
    (2, ["--timeout", "soon"], "--timeout 'soon' must be a positive number of seconds"),
    (2, ["--fault", "causal_mask_diagonal", "collectives"], "--fault 'causal_mask_diagonal' is not planted by any selected case"),
    # Sizes that cannot fit: refused before anything runs, with the estimate.
    (1, ["attention/p2p", "--seq", "1000000000"], "does not fit: host memory: needs about"),
    (1, ["step/train", "--vocab", "2000000000"], "does not fit: host memory: needs about"),
    (2, ["collectives/all_reduce", "--min-bytes", "512G", "--max-bytes", "512G"], "does not fit: host memory"),
    (2, ["collectives/all_gather", "--min-bytes", "4G", "--max-bytes", "4G"], "does not fit: host memory"),
    (2, ["tp_sp/mlp", "--hidden", "4000000"], "does not fit: host memory"),
    (1, ["moe", "--set", "tokens=100000000", "--hidden", "4096"], "does not fit: host memory"),
    (1, ["pipeline/1f1b", "--hidden", "100000", "--ffn", "100000"], "does not fit: host memory"),
    (1, ["ops/gemm", "--set", "m=1"], "no selected case has an option 'm'"),
]


def run(ranks, args, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    iters = [] if "--iters" in args else ["--iters", "0"]
    output = [] if "-o" in args else ["-o", out]
    cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", SEXTANT, "run"] + output + iters + args
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


class BadInput(unittest.TestCase):
    def test_each_rule(self):
        for ranks, args, expected in BAD_INPUT:
            with self.subTest(args=" ".join(args)), tempfile.TemporaryDirectory() as out:
                p = run(ranks, args, out)
                self.assertEqual(p.returncode, 2, f"{args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
                lines = [l for l in p.stderr.splitlines() if l.startswith("sextant:")]
                self.assertEqual(len(lines), 1, f"{args}: expected one error line, got {lines}")
                self.assertIn(expected, lines[0])
                self.assertEqual(os.listdir(out), [], f"{args}: a results file was written")

    def test_dataset_rules(self):
        """A dataset the model cannot read, and a broken one: refused before anything runs."""
        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as out:
            prefix = os.path.join(tmp, "readme")
            subprocess.run([sys.executable, os.path.join(here, "../scripts/preprocess_data.py"), "--input",
                            os.path.join(here, "../README.md"), "--output-prefix", prefix], check=True,
                           capture_output=True)
            with open(prefix + ".idx", "rb") as f:
                idx = f.read()
            with open(os.path.join(tmp, "broken.idx"), "wb") as f:
                f.write(b"MMIDIDY" + idx[7:])
            os.symlink(prefix + ".bin", os.path.join(tmp, "broken.bin"))
            for args, expected in (
                    (["--set", f"data={prefix}", "--set", "vocab=128"],
                     "--vocab 128 must exceed the largest token id 256"),
                    (["--set", f"data={prefix}", "--set", "vocab=512", "--seq", "100000"], "fewer than the 100001"),
                    (["--set", f"data={tmp}/broken", "--set", "vocab=512"], f"{tmp}/broken.idx: bad magic")):
                p = run(2, ["step/train"] + args, out)
                self.assertEqual(p.returncode, 2, f"{args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
                lines = [l for l in p.stderr.splitlines() if l.startswith("sextant:")]
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(expected, lines[0])
                self.assertEqual(os.listdir(out), [])

    def test_config_file_rules(self):
        """A --config file goes through the same checks as the flags."""
        files = [
            ("tp = \"abc\"\n", [], ": tp: "),
            ("seqq = 64\n", ["attention"], "did you mean 'seq'?"),
            ("seq = 64.5\n", ["attention"], "seq '64.5' must be an integer"),
            ("causal = \"maybe\"\n", ["attention"], "causal 'maybe' must be true or false"),
            ("seq = nan\n", ["attention"], "seq 'nan' must be an integer"),
            ("[model]\nseq = 64\n", ["attention"], "table [model] is not known (only [set] is)"),
            ("seq = \n", ["attention"], "line 1"),
            ("warmup = -3\n", [], "--warmup -3 must be at least 0"),
            ("config = \"other.toml\"\n", [], "a config file cannot name another"),
            ("set = [\"causal\"]\n", ["attention"], "'causal' must look like key=value"),
            ("\0\1\2binary", [], "is not a text file"),
        ]
        for content, args, expected in files:
            with self.subTest(content=content), tempfile.TemporaryDirectory() as where, \
                    tempfile.TemporaryDirectory() as out:
                path = os.path.join(where, "run.toml")
                with open(path, "w") as f:
                    f.write(content)
                p = run(1, args + ["--config", path], out)
                self.assertEqual(p.returncode, 2, f"{content!r}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
                lines = [l for l in p.stderr.splitlines() if l.startswith("sextant:")]
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(expected, lines[0])
                self.assertEqual(os.listdir(out), [], "a results file was written")
        with tempfile.TemporaryDirectory() as out:
            p = run(1, ["--config", out], out)
            self.assertEqual(p.returncode, 2)
            self.assertIn(f"--config '{out}' is not a readable file", p.stderr)

    def test_config_file_values_apply_and_flags_win(self):
        with tempfile.TemporaryDirectory() as where, tempfile.TemporaryDirectory() as out:
            path = os.path.join(where, "run.toml")
            with open(path, "w") as f:
                f.write('selection = ["attention/p2p"]\nprofile = "ci"\ndtype = "f32"\n'
                        'seq = 32\n[set]\ncausal = true\nlayout = "zigzag"\n')
            p = run(2, ["--config", path, "--seq", "48"], out)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(glob.glob(os.path.join(out, "sextant-*.json"))[0]) as f:
                doc = json.load(f)
            self.assertTrue(doc["cases"])
            for c in doc["cases"]:
                self.assertEqual((c["suite"], c["case"], c["dtype"]), ("attention", "p2p", "f32"))
                self.assertEqual(c["params"]["seq"], 48, "the flag wins over the file")
                self.assertEqual((c["params"]["causal"], c["params"]["layout"]), (True, "zigzag"))

    def test_unwritable_output_folder(self):
        with tempfile.NamedTemporaryFile() as f:
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            p = subprocess.run([MPIEXEC, "-np", "1", SEXTANT, "run", "-o", f.name], capture_output=True,
                               text=True, env=env, timeout=60)
            self.assertEqual(p.returncode, 2)
            self.assertIn(f"--out '{f.name}' is not a directory", p.stderr)

    def test_good_run_writes_one_file_and_exits_zero(self):
        with tempfile.TemporaryDirectory() as out:
            p = run(2, ["collectives/all_reduce", "--profile", "ci", "--iters", "1"], out)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(len([f for f in os.listdir(out) if f.endswith(".json")]), 1)
            p = run(2, ["collectives/all_reduce", "--profile", "ci", "--iters", "1"], out)
            self.assertEqual(len([f for f in os.listdir(out) if f.endswith(".json")]), 2,
                             "a second run must not overwrite the first")

    def test_plan_finds_the_reference_configs_valid_and_fitting(self):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        rows = [
            ["--model", "llama3-405b", "--device", "H100", "--gpus", "16384", "--global-batch", "2048",
             "--check", "tp=8,pp=16,dp=128,recompute=full"],
            ["--model", "deepseek-v3", "--device", "H800", "--gpus", "2048", "--global-batch", "15360",
             "--check", "tp=1,pp=16,dp=128,ep=64,recompute=full"],
        ]
        for args in rows:
            p = subprocess.run([SEXTANT, "plan"] + args, capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("valid and fits in memory", p.stdout)
        p = subprocess.run([SEXTANT, "plan", "--model", "llama2-70b", "--gpus", "8", "--global-batch", "8", "--device",
                            "Z100", "--memory-gb", "96", "--peak-tflops", "1200"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)  # another GPU, described by its memory and peak
        self.assertIn("8 x Z100 (96 GiB, 1200 TFLOP/s", p.stdout)
        p = subprocess.run([SEXTANT, "plan", "--model", "llama2-70b", "--heads", "8", "--gpus", "64",
                            "--global-batch", "1024", "--check", "tp=16,dp=4"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("tp 16 must divide heads 8", p.stderr)

    def test_plan_reference_fits_on_published_runs_and_overlap_is_an_input(self):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.run([SEXTANT, "plan", "--reference"], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [l for l in p.stdout.splitlines() if l[:2] in ("  ", "* ") and "%" in l and " x " in l]
        self.assertGreaterEqual(len(rows), 12)
        self.assertEqual(p.stdout.count("source: "), len(rows))
        self.assertIn("held out: median", p.stdout)
        base = ["plan", "--model", "deepseek-v3", "--device", "H800", "--gpus", "2048", "--global-batch", "15360",
                "--check", "tp=1,pp=16,dp=128,ep=64", "--top", "1"]

        def checked_mfu(*extra, model=base):
            q = subprocess.run([SEXTANT] + model + list(extra), capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(q.returncode, 0, q.stderr)
            line = q.stdout.splitlines()[q.stdout.splitlines().index(next(
                l for l in q.stdout.splitlines() if l.startswith("# --check"))) + 1]
            return float(line.split("%")[0].split()[-1])

        plain = checked_mfu()
        self.assertGreater(checked_mfu("--overlap", "ep=1"), plain)  # DualPipe hides the all-to-all
        self.assertGreater(checked_mfu("--precision", "fp8"), plain)
        self.assertLess(checked_mfu("--attention", "unfused"), plain)  # the scores through memory
        # Nemotron 8B's shape, whose 256K vocabulary makes the loss's passes show.
        nemotron_8b = ["plan", "--layers", "32", "--hidden", "4096", "--heads", "32", "--vocab", "256000", "--seq", "4096",
                     "--gpus", "8", "--global-batch", "128", "--micro-batch", "4", "--check", "tp=2,dp=4", "--top", "1"]
        fused = checked_mfu(model=nemotron_8b)
        # The gradients' wire type shows where the DP exchange is exposed (dp 32 across nodes): half the
        # bytes in bf16.
        across_nodes = nemotron_8b[:nemotron_8b.index("--gpus")] + [
            "--gpus", "64", "--global-batch", "256", "--micro-batch", "4", "--check", "tp=2,dp=32", "--top", "1",
            "--overlap", "dp=0"]
        self.assertGreater(checked_mfu("--grad-reduce", "bf16", model=across_nodes), checked_mfu(model=across_nodes))
        self.assertLess(checked_mfu("--cross-entropy", "unfused", model=nemotron_8b), fused)  # f32 passes over logits
        # Nemotron's activation: the same FLOPs as GELU's MLP, more passes through memory.
        self.assertLess(checked_mfu("--mlp", "squared-relu", model=nemotron_8b),
                        checked_mfu("--mlp", "gelu", model=nemotron_8b))
        for bad, message in ((["--overlap", "ep=2"], "--overlap ep=2 must be a fraction from 0 to 1"),
                             (["--attention", "flash"], "--attention: flash not in {fused,unfused}"),
                             (["--cross-entropy", "te"], "--cross-entropy: te not in {fused,unfused}"),
                             (["--grad-reduce", "fp16"], "--grad-reduce: fp16 not in {f32,bf16}"),
                             (["--overlap", "xx=1"], "--overlap key 'xx' must be one of tp, dp, ep, cp, pp"),
                             (["--precision", "fp8"], "--precision fp8 needs FP8 tensor cores")):
            args = base + bad if bad[0] != "--precision" else [a if a != "H800" else "A100" for a in base] + bad
            q = subprocess.run([SEXTANT] + args, capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(q.returncode, 2, q.stdout + q.stderr)
            self.assertIn(message, q.stderr)

    def test_plan_without_a_preset_plans_a_gpt_and_says_so(self):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        gpt2_xl = ["--layers", "48", "--hidden", "1600", "--heads", "25", "--vocab", "50257", "--seq", "1024",
                   "--gpus", "8", "--global-batch", "512", "--top", "1"]
        p = subprocess.run([SEXTANT, "plan"] + gpt2_xl, capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        header = p.stdout.splitlines()[0]
        self.assertIn("GPT base: GELU MLP, ffn 4h, tied embeddings", header)
        self.assertIn("overrides: --layers 48 --hidden 1600 --heads 25", header)
        self.assertIn(": 1.56B parameters", header)
        # The step's assumptions beyond the model, the planner's defaults unless a flag changed them.
        self.assertIn("# linears bf16, attention fused, cross-entropy fused, gradients reduced in f32, overlap tp 0 dp 1 ep 0 "
                      "cp 1 pp 1, micro batch 1",
                      p.stdout.splitlines())
        self.assertNotIn("llama", header)
        # A preset's overrides are named too, and change the count.
        p = subprocess.run([SEXTANT, "plan", "--model", "llama2-70b", "--gpus", "64", "--global-batch", "1024",
                            "--mlp", "gelu", "--tied-embeddings", "true", "--top", "1"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("llama2-70b (preset), overrides: --mlp gelu --tied-embeddings true: 49.92B", p.stdout)

    def test_plan_replays_a_stored_sweep(self):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        stored = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "../results/runs/xeon-2core-2026-12-07c/*.json")))[0]
        p = subprocess.run([SEXTANT, "plan", "--replay", stored], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(stored) as f:
            cases = [c for c in json.load(f)["cases"] if c["case"] == "sweep"]
        headers = [l for l in p.stdout.splitlines() if l.startswith("step/sweep at ")]
        self.assertEqual([int(h.split()[2]) for h in headers], [c["ranks"] for c in cases])
        # Every config of every case, with its measured step and both predictions.
        for c in cases:
            ranking = c["perf"]["metrics"]["ranking"]
            for row in ranking["value"] if isinstance(ranking, dict) else ranking:
                line = next(l for l in p.stdout.splitlines() if l.split()[:1] == [row["config"]])
                self.assertIn("%.2fms" % (row["step_s"] * 1e3), line)
                self.assertEqual(line.count("ms"), 3, line)

    def test_qualify_and_plan_refuse_bad_input_before_printing_anything(self):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        rows = [
            (["qualify", "--profile", "bogus"], "--profile 'bogus' must be default, ci or qualify"),
            (["qualify", "--expectations", "/nonexistent.toml"], "--expectations '/nonexistent.toml' is not"),
            (["qualify", "--ranks", "1,x"], "--ranks '1,x' must be a comma-separated list of integers"),
            (["qualify", "-o", "/proc/sextant-out"], "--out '/proc/sextant-out' is not a directory"),
            (["plan", "--model", "llama2-70b", "--gpus", "-1", "--global-batch", "8"], "--gpus -1 must be at least 1"),
            (["plan", "--model", "llama2-70b", "--gpus", "8", "--global-batch", "-8"],
             "--global-batch -8 must be at least 1"),
            (["plan", "--model", "llama2-70b", "--global-batch", "8"], "--gpus is required"),
            (["plan", "--model", "nope", "--gpus", "8", "--global-batch", "8"], "--model 'nope' is not a preset"),
            (["plan", "--gpus", "99999999999999", "--global-batch", "8"], "--gpus 99999999999999 must be at most"),
            (["plan", "--gpus", "8", "--global-batch", "8"], "without --model, --layers, --hidden and --heads"),
            (["plan", "--layers", "2", "--hidden", "100", "--heads", "3", "--gpus", "8", "--global-batch", "8"],
             "--heads 3 must divide --hidden 100"),
        ]
        plan = ["plan", "--model", "llama2-70b", "--gpus", "8", "--global-batch", "8"]
        rows += [(plan + extra, expected) for extra, expected in [
            (["--gpus-per-node", "0"], "--gpus-per-node 0 must be at least 1"),
            (["--memory-gb", "nan"], "--memory-gb nan must be a finite number above 0"),
            (["--peak-tflops", "-5"], "--peak-tflops -5 must be a finite number above 0"),
            (["--layers", "0"], "--layers 0 must be at least 1"),
            (["--experts", "-1"], "--experts -1 must be at least 0"),
            (["--gemm-efficiency", "1.5"], "--gemm-efficiency 1.5 must be a finite number above 0 and at most 1"),
            (["--micro-batch", "9"], "--micro-batch 9 must be at most 8"),
            (["--check", "tp=x"], "--check tp=x must be a whole number from 1 to 1048576"),
            (["--check", "recompute=partial"], "--check recompute=partial must be none, selective or full"),
            (["--check", "tp=8,vpp=2"], "--check vpp 2 needs pp > 1 (the interleaved schedule splits a pipeline)"),
            (["--mtp-layers", "-1"], "--mtp-layers -1 must be at least 0"),
            (["--json", "/proc/sextant.json"], "--json '/proc/sextant.json' cannot be written"),
            (["--device", "Z100"], "--device 'Z100' must be one of H100"),
            (["--mlp", "relu"], "--mlp: relu not in {gelu,swiglu,squared-relu}"),
        ]]
        # A replay reads a results file whose sweep recorded every input of the planner.
        before_replay = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "../results/runs/xeon-2core-2026-12-07/*.json")))[0]
        rows += [
            (["plan", "--replay", "/nonexistent.json"], "--replay '/nonexistent.json' is not a readable file"),
            (["plan", "--replay", before_replay], "the step/sweep record lacks the metric sync_chunk_s"),
        ]
        rows += [(["qualify", "--baseline-tolerance", "0.2"], "--baseline-tolerance requires --baseline")]
        for args, expected in rows:
            with self.subTest(args=" ".join(args)), tempfile.TemporaryDirectory() as out:
                extra = [] if "-o" in args or args[0] == "plan" else ["-o", out]
                p = subprocess.run([MPIEXEC, "-np", "1", SEXTANT, *args, *extra], capture_output=True, text=True,
                                   env=env, timeout=120)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                lines = [l for l in p.stderr.splitlines() if l.startswith("sextant:")]
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(expected, lines[0])
                self.assertEqual(p.stdout.strip(), "", "nothing printed before the refusal")
                self.assertEqual(os.listdir(out), [])

    def test_list_refuses_what_it_would_ignore(self):
        for args, expected in [(["--metrics", "nosuch"], "list --metrics lists everything and takes no selection"),
                               (["--tolerances", "ops"], "list --tolerances lists everything and takes no selection"),
                               (["--metrics", "--tolerances"], "list takes one of --options, --metrics, --tolerances")]:
            with self.subTest(args=" ".join(args)):
                p = subprocess.run([SEXTANT, "list", *args], capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertEqual(p.stdout, "")
                self.assertIn(expected, p.stderr)

    def test_a_planted_fault_fails_the_run(self):
        with tempfile.TemporaryDirectory() as out:
            p = run(2, ["collectives/all_reduce", "--profile", "ci", "--fault", "drop_rank"], out)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("fail", p.stdout)


if __name__ == "__main__":
    SEXTANT, MPIEXEC = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
