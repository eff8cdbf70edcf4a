"""One process of a torchrun data-parallel run of `tests.training.two_device_run`'s jobs.

`python -m torch.distributed.run --standalone --nproc_per_node=2 -m
tests.training.torch_ranks_run WORK_DIR pretraining|finetuning` on the torch
backend, with WORK_DIR prepared by `two_device_run.write_job_data`; process 0
writes what the job returns to WORK_DIR/ranks.json. For pretraining, the
processes then resume the run the caller started in
WORK_DIR/none-then-data_parallel (see `two_device_run.copy_first_checkpoint`),
whose final weights are `resumed_weights` there.
"""

import json
import os
import sys

from tests.training.two_device_run import JOBS
from tests.training.two_device_run import pretrain


def main(work_dir, job):
    result = JOBS[job]("data_parallel", work_dir)
    result["weights"] = [weights.tolist() for weights in result["weights"]]
    if job == "pretraining":
        resumed = pretrain("data_parallel", work_dir, "none-then-data_parallel")
        result["resumed_weights"] = [weights.tolist() for weights in resumed["weights"]]
    if int(os.environ["RANK"]) == 0:
        with open(os.path.join(work_dir, "ranks.json"), "w") as file:
            json.dump(result, file)


if __name__ == "__main__":
    main(*sys.argv[1:])
