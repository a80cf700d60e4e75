"""The training recipe switches (moe_a2a_overlap, cuda_graphs, moe_dispatcher) reach the
Workload from the CLI (`estimate`, `sweep`, `compare`) and the Python API, as the `dse
predict` columns of the same names do; bad names exit 2 with a one-line error."""
import pytest

import dse
from dse.cli import main
from dse.errors import InputError
from dse.spec.layout import recipe_codes

MOE = dict(model="mixtral-8x7b", hardware="h100-sxm-80gb", gpus=64, tp=2, ep=8,
           global_batch=256, seq_len=4096, sp=True)


def test_recipe_codes_names_and_errors():
    assert recipe_codes() == {"moe_a2a_overlap": 0, "cuda_graphs": 0, "moe_dispatcher": 0,
                              "recompute_modules": 1, "grad_reduce_fp32": -1, "fp8_attention": 0,
                              "ddp_bucket_elems": 0}
    assert recipe_codes(True, "full_iteration", "hybridep", recompute_modules="mla_up_proj",
                        grad_reduce_in_fp32=False, fp8_attention=True, precision=5,
                        ddp_bucket_size="768000000") == {
        "moe_a2a_overlap": 1, "cuda_graphs": 1, "moe_dispatcher": 1, "recompute_modules": 2,
        "grad_reduce_fp32": 0, "fp8_attention": 1, "ddp_bucket_elems": 768_000_000}
    with pytest.raises(InputError, match="moe_dispatcher"):
        recipe_codes(moe_dispatcher="nccl")
    with pytest.raises(InputError, match="moe_a2a_overlap"):
        recipe_codes(moe_a2a_overlap="yes")
    with pytest.raises(InputError, match="recompute_modules"):
        recipe_codes(recompute_modules="moe")


def test_api_estimate_takes_the_switches():
    base = dse.estimate(**MOE)
    ov = dse.estimate(**MOE, moe_a2a_overlap=True)
    dd = dse.estimate(**MOE, moe_dispatcher="deepep")
    assert ov.workload.moe_a2a_overlap == 1 and dd.workload.moe_dispatcher == 1
    # hiding all-to-all time under compute, or sending fewer bytes, is never slower
    assert ov.step_time_s <= base.step_time_s and dd.step_time_s <= base.step_time_s
    assert ov.step_time_s < base.step_time_s       # this layout exposes its all-to-alls


def test_cli_estimate_flags_and_bad_name(capsys):
    args = ["estimate", "--model", "mixtral-8x7b", "--hardware", "h100-sxm-80gb", "--gpus", "64",
            "--tp", "2", "--ep", "8", "--global-batch", "256", "--seq", "4096", "--sp"]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main(args + ["--moe-a2a-overlap"]) == 0
    over = capsys.readouterr().out
    step = lambda out: float(out.split("step time ")[1].split(" s")[0])
    assert step(over) < step(plain)
    assert main(args + ["--cuda-graphs", "yes"]) == 2
    err = capsys.readouterr().err
    assert "cuda_graphs" in err and err.count("\n") <= 1


@pytest.mark.parametrize("col, cell", [("cuda_graphs", 1.0), ("moe_a2a_overlap", 1.0),
                                       ("moe_dispatcher", 2.0), ("moe_token_drop", 2.0),
                                       ("attention", 1.0), ("framework", 3.0), ("tp_comm_overlap", 1.0),
                                       ("sequence_parallel", 1.0), ("recompute", 2.0)])
def test_a_number_in_a_word_column_is_quoted_as_the_file_wrote_it(col, cell):
    """pandas reads a column holding ``1`` as floats; the refusal quotes the cell as written
    (``'1'``), not as pandas holds it (``'1.0'``) -- every word column of a training row."""
    from dse.predict import _run_facts, _schedule_facts, _token_drop, row_options
    read = {"moe_token_drop": _token_drop, "attention": _run_facts, "framework": _run_facts,
            "tp_comm_overlap": _run_facts, "sequence_parallel": row_options,
            "recompute": row_options}.get(col, _schedule_facts)
    with pytest.raises(InputError) as e:
        read({col: cell}, "f.csv")
    msg = str(e.value)
    assert col in msg and f"'{int(cell)}'" in msg and ".0'" not in msg
