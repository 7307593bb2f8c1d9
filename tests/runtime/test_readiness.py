"""`nac verify` checks what a run needs beyond the bytes: every op has a kernel. A file it calls
clean then fails a run only for reasons that depend on the values."""
from __future__ import annotations

import random
import warnings

from nac_engine import NacFormatError, read, verify, write
from nac_engine.cli import main
from nac_engine.runtime.errors import NacRuntimeError, NotSupported
from nac_engine.runtime.readiness import kernel_problems
from nac_engine.runtime.session import Session
from tests.conftest import corpus_params, nac_corpus_files
import pytest

MUTANTS = 1500


@pytest.mark.parametrize("path", corpus_params())
def test_every_corpus_op_has_a_kernel(path):
    assert kernel_problems(read(path)) == []


def test_an_op_without_a_kernel_is_a_verify_problem(tmp_path, corpus_case, capsys):
    nac = read(corpus_case("mlp"))
    a = next(iter(nac.cmap))
    nac.cmap[a] = "aten.splip.Tensor"
    nac.invalidate()
    path = tmp_path / "bad.nac"
    path.write_bytes(write(nac))
    first = next(i for i in nac.instructions if i.a == a)
    (problem,) = kernel_problems(read(path))
    assert problem.section == "OPS" and problem.offset == first.offset
    assert f"instruction {first.index}" in problem.reason and "aten.splip" in problem.reason
    assert main(["verify", str(path)]) == 1
    assert "aten.splip" in capsys.readouterr().out
    assert main(["verify", "--bytes-only", str(path)]) == 0


@pytest.mark.skipif(not nac_corpus_files(), reason="corpus not present")
def test_verify_clean_mutants_fail_a_run_only_for_value_reasons():
    """Structure-aware mutants (test_fuzz's): of those that decode and verify clean, bytes and
    kernels, none stops a run for want of a kernel (a garbage op name)."""
    from tests.format.test_fuzz import Seed, case_feeds, mutate
    rnd = random.Random(0x0DD)
    seeds = [Seed(p.parent.name, p.read_bytes(), case_feeds(str(p))) for p in nac_corpus_files()]
    clean = ran = 0
    for _ in range(MUTANTS):
        seed = rnd.choice(seeds)
        mutant, _kind = mutate(rnd, seed)
        try:
            nac = read(mutant)
        except NacFormatError:
            continue
        if verify(read(mutant, strict=False)) or kernel_problems(nac):
            continue
        clean += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Session(nac, feeds=list(seed.feeds) or None) as s:
                    s.run()
            ran += 1
        except NotSupported as e:
            assert "kernel" not in str(e) and "ATen op name" not in str(e) and "torch.ops" not in str(e), e
        except NacRuntimeError:
            pass                  # a value the op cannot take (a shape, an index): not verify's
    assert clean > 20 and ran > 0, (clean, ran)
